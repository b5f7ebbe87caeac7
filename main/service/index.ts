// The HTTP client of the Bucket Storage Service and its storage host. Maps every HTTP failure
// to an EngineError in one place (http-errors.ts). May import main/api and main/protocol only.

export * from './base-url.ts';
export { AnswerCutError, isServiceRefusal, serviceMsgOf } from './http-errors.ts';
export { watchSentAgain, type SentAgain } from './sent-again.ts';
export * from './retry-policy.ts';
export * from './server-clock.ts';
export * from './service-client.ts';
export { socketDispatcher } from './socket-dispatcher.ts';
export * from './transfer-rate-limit.ts';
export type { AnswerBody } from './streamed-answer.ts';
export { useProxyFromEnvironment } from './proxy-from-environment.ts';
export * from './service-outage.ts';
