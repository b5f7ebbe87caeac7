import { accountRoutes } from './account-routes.ts';
import { authRoutes } from './auth-routes.ts';
import { bucketRoutes } from './bucket-routes.ts';
import { metadataRoutes } from './metadata-routes.ts';
import type { RouteSpec } from './route-spec.ts';
import { storageRoutes } from './storage-routes.ts';

/** The route table of the service; tests generate their matrices from it. */
export const ROUTES: readonly RouteSpec[] = [
  ...authRoutes,
  ...bucketRoutes,
  ...metadataRoutes,
  ...storageRoutes,
  ...accountRoutes,
];
export type { AuthKind, RouteSpec } from './route-spec.ts';
