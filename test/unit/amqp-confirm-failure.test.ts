/**
 * How a failed AMQP publisher confirm is recorded: a negative acknowledgement is a refusal by the
 * broker; a channel closed while the confirm was awaited (amqplib's 'channel closed', as when the
 * shared connection is closed after another attempt on it timed out) is a connection error whose
 * text says the message may have been delivered — not a refusal the receiver never made.
 */
import { describe, expect, it } from 'vitest';
import { confirmFailure } from '../../src/webhooks/amqp-publisher.ts';

describe('AMQP confirm failures', () => {
  it('a nack is the broker refusing the message', () => {
    const failure = confirmFailure(new Error('message nacked'));
    expect(failure.outcome).toBe('broker_rejected');
    expect(failure.message).toContain('refused');
  });

  it('a channel closed before the confirm is a connection error that may have delivered the message', () => {
    const failure = confirmFailure(new Error('channel closed'));
    expect(failure.outcome).toBe('connection_error');
    expect(failure.message).toMatch(/may have been delivered/);
  });
});
