/**
 * tokenpace: token-bucket pacing for Node.js.
 *
 * Public exports only: values and `export type`. Everything here is the
 * contract; anything not exported is free to change.
 */

export { type Clock, systemClock } from './clock.js';
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
  QueueFullError,
  StoreUnavailableError,
  TokenpaceError,
  WaitTooLongError,
} from './errors.js';
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
export type { ThrottleCounters } from './stream/counters.js';
export { ThrottleGroup, type ThrottleGroupOptions, type ThrottleMemberOptions } from './stream/group.js';
export { Throttle, type ThrottleOptions, type ThrottleStreamOptions } from './stream/throttle.js';
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
