/**
 * Records what a diagnostics channel publishes during one test: `record(name)` subscribes and
 * returns the list it fills; every subscription ends after the test (vitest's afterEach).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterEach } from 'vitest';

const subscriptions: Array<[string, (message: unknown) => void]> = [];

afterEach(() => {
  for (const [name, listener] of subscriptions.splice(0)) unsubscribe(name, listener);
});

export function record<T>(name: string): T[] {
  const messages: T[] = [];
  const listener = (message: unknown) => messages.push(message as T);
  subscribe(name, listener);
  subscriptions.push([name, listener]);
  return messages;
}
