'use strict';
// The sample of docs/testing-other-languages.md: nsqjs publishes to a box started once for
// this file; the test waits for a channel's counts, captures, injects a failed publish and
// moves the clock. Run with `node --test` (NSQBOX names the nsqbox program).
const { after, before, test } = require('node:test');
const assert = require('node:assert/strict');
const nsq = require('nsqjs');
const { startBox } = require('..');

let box;

before(async () => {
  box = await startBox({ args: ['--clock', 'manual'] });
});

after(async () => {
  await box.stop();
});

async function connectedWriter() {
  const writer = new nsq.Writer(box.nsqdHost, box.nsqdPort);
  await new Promise((resolve, reject) => {
    writer.once('ready', resolve);
    writer.once('error', reject);
    writer.connect();
  });
  return writer;
}

function publish(writer, topic, body) {
  return new Promise((resolve, reject) =>
    writer.publish(topic, body, (err) => (err ? reject(err) : resolve())),
  );
}

test('an nsqjs publish is captured and waits on a channel', async () => {
  const writer = await connectedWriter();
  try {
    const orders = await box.capture('orders');
    // n = 0 only subscribes: the channel exists, so it keeps what is published next
    await box.consume('orders', 'billing', 0);
    await publish(writer, 'orders', 'order 1');
    await publish(writer, 'orders', 'order 2');
    const billing = await box.waitFor('orders', 'billing', { depth: 2, in_flight: 0 });
    assert.equal(billing.message_count, 2);
    await orders.close();
    assert.deepEqual(
      orders.messages.map((m) => m.body.toString()),
      ['order 1', 'order 2'],
    );
    assert.equal(orders.lost, false);
    const taken = await box.consume('orders', 'billing', 2);
    assert.deepEqual(taken.map(String), ['order 1', 'order 2']);
  } finally {
    writer.close();
  }
});

test('a failed publish is seen by nsqjs, then publishing works again', async () => {
  const fault = await box.failPublishes({ topic: 'payments', count: 1 });
  const writer = await connectedWriter();
  const closed = new Promise((resolve) => writer.once('closed', resolve));
  await assert.rejects(publish(writer, 'payments', 'refused'), /E_PUB_FAILED/);
  await closed; // E_PUB_FAILED is fatal: nsqd closes the connection
  const again = await connectedWriter();
  try {
    await publish(again, 'payments', 'accepted');
    await box.waitFor('payments', null, { depth: 1, message_count: 1 });
  } finally {
    again.close();
  }
  assert.equal(await fault.lift(), false); // its one use is spent
});

test('a deferred message falls due when the clock moves, not before', async () => {
  const writer = await connectedWriter();
  try {
    await box.consume('reminders', 'mail', 0); // the channel
    await new Promise((resolve, reject) =>
      // nsqjs 0.13's deferPublish wants the body in an array (publish wraps it itself)
      writer.deferPublish('reminders', ['in an hour'], 3600 * 1000, (err) =>
        err ? reject(err) : resolve(),
      ),
    );
    await box.waitFor('reminders', 'mail', { deferred: 1, depth: 0 });
    assert.equal(await box.advance('59m59s'), 0); // a second early: still deferred
    await box.waitFor('reminders', 'mail', { deferred: 1, depth: 0 });
    assert.equal(await box.advance(1), 1);
    await box.waitFor('reminders', 'mail', { deferred: 0, depth: 1 });
  } finally {
    writer.close();
  }
});
