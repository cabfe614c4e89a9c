/**
 * The controller throttleInterceptor hands the downstream handler: it exists
 * before the request is sent (so an abort takes a waiting request out of the
 * queue) and forwards to the connection's controller once sent.
 */

import type { Dispatcher } from 'undici';

type DispatchController = Dispatcher.DispatchController;

/**
 * The controller the downstream handler holds for the whole request: it
 * exists before the request is sent (so an abort can take a waiting request
 * out of the queue) and forwards to the connection's controller once sent.
 * The connection is paused while the caller paused it or the bandwidth
 * throttle's buffer is full.
 */
export class PacedController implements DispatchController {
  #target: DispatchController | undefined = undefined;
  #callerPaused = false;
  #throttleFull = false;
  #targetPaused = false;
  #aborted = false;
  #reason: Error | null = null;
  onAbortWaiting: ((reason: Error) => void) | undefined = undefined;
  onCallerPause: ((paused: boolean) => void) | undefined = undefined;

  set target(target: DispatchController) {
    this.#target = target;
    this.#targetPaused = false;
    if (this.#aborted && this.#reason !== null) {
      target.abort(this.#reason);
      return;
    }
    this.#sync();
  }

  set throttleFull(full: boolean) {
    this.#throttleFull = full;
    this.#sync();
  }

  #sync(): void {
    const target = this.#target;
    if (target === undefined) return;
    const pause = this.#callerPaused || this.#throttleFull;
    if (pause && !this.#targetPaused) {
      this.#targetPaused = true;
      target.pause();
    } else if (!pause && this.#targetPaused) {
      this.#targetPaused = false;
      target.resume();
    }
  }

  pause(): void {
    this.#callerPaused = true;
    this.onCallerPause?.(true);
    this.#sync();
  }

  resume(): void {
    this.#callerPaused = false;
    this.onCallerPause?.(false);
    this.#sync();
  }

  abort(reason: Error): void {
    if (this.#target !== undefined) {
      this.#target.abort(reason);
      return;
    }
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.onAbortWaiting?.(reason);
  }

  get paused(): boolean {
    return this.#callerPaused || (this.#target?.paused ?? false);
  }

  get aborted(): boolean {
    return this.#target?.aborted ?? this.#aborted;
  }

  get reason(): Error | null {
    return this.#target?.reason ?? this.#reason;
  }

  get rawHeaders(): DispatchController['rawHeaders'] {
    return this.#target?.rawHeaders ?? null;
  }

  set rawHeaders(value: DispatchController['rawHeaders']) {
    if (this.#target) this.#target.rawHeaders = value;
  }

  get rawTrailers(): DispatchController['rawTrailers'] {
    return this.#target?.rawTrailers ?? null;
  }

  set rawTrailers(value: DispatchController['rawTrailers']) {
    if (this.#target) this.#target.rawTrailers = value;
  }
}
