import { DEFAULT_LIMITS } from '../../main/protocol/index.ts';
import { startFaultProxy, type FaultProxy } from './fault-proxy.ts';
import { startTestService, type TestService } from './test-service.ts';

/**
 * A test service with the spec's limits, and a fault proxy in front of it that is also the
 * storage host the service announces: every shard upload and block fetch goes through the
 * proxy, and every other request too for a device logged in at `proxy.url`.
 */
export async function startProxiedService(): Promise<{ service: TestService; proxy: FaultProxy }> {
  const service = await startTestService({ limits: DEFAULT_LIMITS });
  const proxy = await startFaultProxy(service.url);
  service.service.ctx.storageHost = proxy.url;
  return { service, proxy };
}
