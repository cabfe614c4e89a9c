/**
 * tokenpace: token-bucket pacing for Node.js.
 *
 * Public exports only: values and `export type`. Everything here is the
 * contract; anything not exported is free to change.
 */

export { type Clock, systemClock } from './clock.js';
export { channelNames } from './diagnostics.js';
export {
  AbortError,
  BurstTooSmallError,
  ClosedError,
  CostExceedsCapacityError,
  type ErrorByCode,
  type ErrorCode,
  InvalidDurationError,
  InvalidOptionError,
  InvalidRateError,
  InvalidSizeError,
  isTokenpaceError,
  JobTimeoutError,
  NotSupportedError,
  QueueFullError,
  StoreUnavailableError,
  TokenpaceError,
  TooManyKeysError,
  WaitTooLongError,
} from './errors.js';
export {
  type BandwidthExchangeOp,
  type BandwidthLease,
  type BandwidthParams,
  type BandwidthSource,
  type BandwidthStore,
  MemoryBandwidthStore,
} from './fleet/bandwidth-store.js';
export { RedisBandwidthStore, type RedisBandwidthStoreOptions } from './fleet/redis-bandwidth-store.js';
export { RedisFleetStore, type RedisFleetStoreEvents, type RedisFleetStoreOptions } from './fleet/redis-fleet-store.js';
export {
  type AcquireOp,
  type AcquireResult,
  type ExchangeAcquire,
  type ExchangeGrant,
  type ExchangeOp,
  type ExchangeResult,
  type FleetParams,
  type FleetSnapshot,
  type FleetStore,
  type HeldLease,
  MemoryFleetStore,
} from './fleet/store.js';
export type { AdaptiveOptions, RateChangeInfo } from './http/adaptive-origin.js';
export type { ProxyHeader, TrustProxy } from './http/client-address.js';
export {
  type FastifyReplyLike,
  type FastifyRequestLike,
  type RateLimitHook,
  rateLimitHook,
} from './http/fastify.js';
export {
  type HonoContextLike,
  type HonoRateLimit,
  type HonoRateLimitOptions,
  honoRateLimit,
} from './http/hono.js';
export {
  type OriginLimits,
  type ThrottleInterceptor,
  type ThrottleInterceptorOptions,
  throttleInterceptor,
} from './http/interceptor.js';
export {
  type KoaContextLike,
  type KoaRateLimit,
  type KoaRateLimitOptions,
  koaRateLimit,
} from './http/koa.js';
export type {
  ClientPauseMessage,
  ClientRateMessage,
  ClientRejectedMessage,
  ClientStartMessage,
  HttpDecisionMessage,
  HttpErrorMessage,
} from './http/messages.js';
export { type HttpRequest, type RateLimitMiddleware, rateLimit } from './http/middleware.js';
export type { ErrorInfo, LimitInfo, RateLimitOptions, RequestRateLimit } from './http/rate-limit-options.js';
export type { HeaderStyle, ProblemDetails } from './http/response.js';
export type { DeciderTakeOptions, RateLimitDecider } from './http/types.js';
export {
  type BucketKeyedLimiterOptions,
  type GlobalLimitOptions,
  type KeyedDecisionMessage,
  KeyedLimiter,
  type KeyedLimiterOptions,
  type KeyedRejectedMessage,
  type KeyedTakeOptions,
  type LimitsFunction,
  type PlanFunction,
  type PlanKeyedLimiterOptions,
  type PlanLimits,
  type WindowKeyedLimiterOptions,
} from './keyed/keyed-limiter.js';
export { MemoryStore, type MemoryStoreOptions } from './keyed/memory-store.js';
export { RedisStore, type RedisStoreOptions, type RedisStoreStats } from './keyed/redis-store.js';
export type { KeyedStore, StoreCredit, StoreMode, StoreOp, StoreResult } from './keyed/store.js';
export {
  MemoryWindowStore,
  type MemoryWindowStoreOptions,
  RedisWindowStore,
  type RedisWindowStoreOptions,
  type RedisWindowStoreStats,
  type WindowKind,
  type WindowOp,
  type WindowStore,
} from './keyed/window-store.js';
export type { Decision } from './meters/decision.js';
export { LeakyBucket, type LeakyBucketOptions, type LeakyDecision } from './meters/leaky-bucket.js';
export {
  type Color,
  type ColorMode,
  type SrTcmOptions,
  srTCM,
  type TcmRefill,
  type TrTcmOptions,
  trTCM,
} from './meters/tcm.js';
export {
  type BucketParams,
  type BucketState,
  type Reservation,
  type ReserveOptions,
  type TakeOptions,
  TokenBucket,
  type TokenBucketOptions,
} from './meters/token-bucket.js';
export {
  FixedWindow,
  SlidingWindow,
  type SlidingWindowOptions,
  type WindowOptions,
} from './meters/windows.js';
export type { PgLikeClient, PostgresClientLike, PostgresJsLikeClient } from './postgres/client.js';
export { PostgresFleetStore, type PostgresFleetStoreOptions } from './postgres/postgres-fleet-store.js';
export { PostgresStore, type PostgresStoreOptions, type PostgresStoreStats } from './postgres/postgres-store.js';
export type { IoredisLikeClient, NodeRedisLikeClient, RedisClientLike } from './redis/client.js';
export { AdaptiveRate, type AdaptiveRateChange, type AdaptiveRateOptions } from './scheduler/adaptive.js';
export type { SchedulerRejectedMessage, SchedulerStartMessage } from './scheduler/events.js';
export {
  KeyedScheduler,
  type KeyedSchedulerListener,
  type KeyedSchedulerOptions,
} from './scheduler/keyed-scheduler.js';
export {
  type ActiveJob,
  type EventName,
  type JobContext,
  type JobFunction,
  type RejectedJob,
  type RejectReason,
  type ScheduleOptions,
  Scheduler,
  type SchedulerCounters,
  type SchedulerEvents,
  type SchedulerListener,
  type SchedulerOptions,
  type WrapOptions,
} from './scheduler/scheduler.js';
export type {
  FailurePolicy,
  MaxmemorySettings,
  StoreDegradedMessage,
  StoreEvents,
  StoreEvictionMessage,
  StoreFailureMessage,
  StoreRecoveredMessage,
} from './stores/health.js';
export type { StreamWaitMessage, ThrottleCounters } from './stream/counters.js';
export type { FleetGroupState } from './stream/fleet-link.js';
export {
  ThrottleGroup,
  type ThrottleGroupOptions,
  type ThrottleMemberOptions,
  type ThrottleSubgroupOptions,
  type WebThrottleMemberOptions,
} from './stream/group.js';
export { Throttle } from './stream/throttle.js';
export type {
  PacingOptions,
  ThrottleOptions,
  ThrottleStreamOptions,
  WebThrottleOptions,
} from './stream/throttle-options.js';
export { WebThrottle } from './stream/web-throttle.js';
export {
  type DurationInput,
  formatDuration,
  formatRate,
  formatSize,
  parseDuration,
  parseRate,
  parseSize,
  type RateInput,
  type SizeInput,
} from './units.js';
