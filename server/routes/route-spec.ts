import type { IncomingMessage } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { StorageClaims } from '../../main/protocol/index.ts';
import type { DeviceCaller } from '../auth/authenticate.ts';
import type { ServiceContext } from '../context.ts';

/** Who may call a route: a device JWT, a storage authorization, or anyone (rate-limited per IP). */
export type AuthKind = 'device' | 'storage' | 'ip';

export interface RouteRequest {
  readonly raw: IncomingMessage;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | undefined>>;
}

export interface DeviceRequest extends RouteRequest {
  readonly device: DeviceCaller;
}

export interface StorageRequest extends RouteRequest {
  readonly storage: StorageClaims;
}

export type Handler<R extends RouteRequest> = (
  ctx: ServiceContext,
  request: R,
  reply: FastifyReply,
) => Promise<unknown>;

export type RouteSpec =
  | { method: Method; url: string; auth: 'device'; handler: Handler<DeviceRequest> }
  | { method: Method; url: string; auth: 'storage'; handler: Handler<StorageRequest> }
  | { method: Method; url: string; auth: 'ip'; handler: Handler<RouteRequest> };

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
