import { createHash, randomBytes } from 'node:crypto';
import { appendFileSync, closeSync, mkdirSync, openSync, readSync, writeFileSync, existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { packSource } from '../main/packer/index.ts';
const MiB = 1 << 20;
const source = '/tmp/canopy-pack/source';
if (!existsSync(source)) {
  for (let i = 0; i < 1000; i++) { const d = path.join(source, 'photos', `d${i % 10}`); mkdirSync(d, { recursive: true }); writeFileSync(path.join(d, `p${i}.jpg`), randomBytes(MiB)); }
  mkdirSync(path.join(source, 'video'), { recursive: true });
  for (let i = 0; i < 2; i++) { const v = path.join(source, 'video', `v${i}.mp4`); writeFileSync(v, new Uint8Array(0)); for (let w = 0; w < 100 * MiB; w += MiB) appendFileSync(v, randomBytes(MiB)); }
  for (let i = 0; i < 10000; i++) { const d = path.join(source, 'docs', `d${i % 100}`); mkdirSync(d, { recursive: true }); writeFileSync(path.join(d, `n${i}.txt`), randomBytes(1024)); }
}
const files = (await readdir(source, { withFileTypes: true, recursive: true })).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
function hashAllMs(): number { const b = Buffer.allocUnsafe(MiB); const s = performance.now(); const h = createHash('sha256'); for (const f of files) { const fd = openSync(f, 'r'); for (let c = readSync(fd, b); c > 0; c = readSync(fd, b)) h.update(b.subarray(0, c)); closeSync(fd); } h.digest(); return performance.now() - s; }
for (let r = 0; r < Number(process.env.ROUNDS ?? 3); r++) {
  const h = hashAllMs();
  const s = performance.now(); const cpu0 = process.cpuUsage();
  await packSource({ nodes: { put: () => undefined }, sourceDir: source, sourceLabel: 'bench', deviceFingerprint: '0'.repeat(40), createdAtSeconds: 0, onLeaf: () => Promise.resolve(), onSkip: () => undefined });
  const p = performance.now() - s; const cpu = process.cpuUsage(cpu0);
  console.log(`hash ${h.toFixed(0)} ms pack ${p.toFixed(0)} ms ratio ${(h / p).toFixed(2)} cpu ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms (user ${(cpu.user/1000).toFixed(0)} sys ${(cpu.system/1000).toFixed(0)})`);
}
