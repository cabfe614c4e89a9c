/**
 * Watchers of abort signals, with one abort listener per signal however many watch it: a listener
 * each would make every add and removal O(n) in the watchers of one signal (Node's EventTarget scans
 * its listeners), and Node warns past 10 of them (MaxListenersExceededWarning), which a process-wide
 * shutdown signal shared by a queue's jobs reaches at once. When a signal aborts, the watchers still
 * there are handed over together, once; a watcher removed before that is not.
 */
export class SignalWatch<T> {
  readonly #bySignal = new Map<AbortSignal, { readonly watchers: Set<T>; readonly onAbort: () => void }>();
  readonly #aborted: (signal: AbortSignal, watchers: Set<T>) => void;

  /** `aborted` receives a signal's watchers when it aborts (they are no longer watched then). */
  constructor(aborted: (signal: AbortSignal, watchers: Set<T>) => void) {
    this.#aborted = aborted;
  }

  add(signal: AbortSignal, watcher: T): void {
    let entry = this.#bySignal.get(signal);
    if (entry === undefined) {
      const watchers = new Set<T>();
      const onAbort = (): void => {
        this.#bySignal.delete(signal);
        this.#aborted(signal, watchers);
      };
      entry = { watchers, onAbort };
      this.#bySignal.set(signal, entry);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    entry.watchers.add(watcher);
  }

  delete(signal: AbortSignal, watcher: T): void {
    const entry = this.#bySignal.get(signal);
    if (entry === undefined || !entry.watchers.delete(watcher) || entry.watchers.size !== 0) return;
    this.#bySignal.delete(signal);
    signal.removeEventListener('abort', entry.onAbort);
  }
}
