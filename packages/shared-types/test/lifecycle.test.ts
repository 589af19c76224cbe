/**
 * The one service lifecycle (src/node/lifecycle.ts), in this process with real listeners: order
 * of opening and closing, unwinding after a failed listen, the drain's grace, time limits on the
 * closing steps, and the states others read. The three services run it as real processes in
 * test/lifecycle.test.ts at the root.
 */
import { createServer, type Server } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { followLifecycle, ListenError, ServiceLifecycle, type ServiceState } from '../src/node/index.js';

function recorder() {
  const lines: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  return {
    lines,
    logger: {
      info: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: 'info', msg, fields }),
      warn: (msg: string, fields?: Record<string, unknown>) => lines.push({ level: 'warn', msg, fields }),
    },
  };
}

const occupied = (): Promise<Server> =>
  new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => resolve(s));
  });

describe('ServiceLifecycle', () => {
  it('closes what it opened in reverse order, after the listeners stop accepting and the drain', async () => {
    const { lines, logger } = recorder();
    const order: string[] = [];
    const states: ServiceState[] = [];
    const life = new ServiceLifecycle({ logger, graceMs: 5000, onState: (s) => states.push(s) });
    life.own('first', 1, () => order.push('close first'));
    await life.open(
      'second',
      () => 2,
      async () => {
        await new Promise((r) => setTimeout(r, 20));
        order.push('close second');
      },
    );
    const server = createServer();
    const [addr, off] = await life.listen([{ what: 'TCP', server, addr: { host: '127.0.0.1', port: 0 } }, null]);
    expect(addr!.port).toBeGreaterThan(0);
    expect(off).toBeNull();
    expect(life.state).toBe('loading');
    life.listening({ tcp: `127.0.0.1:${addr!.port}` });
    life.serving();
    expect(life.state).toBe('serving');
    life.onStop({
      stopAccepting: () => order.push(`stop accepting (listening: ${server.listening})`),
      drain: async (graceMs) => order.push(`drain ${graceMs}`),
      cut: () => order.push('cut'),
      stopping: () => ({ inFlight: 0 }),
      stopped: () => ({ unfinished: 0 }),
    });
    const first = life.stop();
    expect(life.stop()).toBe(first); // once
    await first;
    expect(order).toEqual(['stop accepting (listening: false)', 'drain 5000', 'cut', 'close second', 'close first']);
    expect(states).toEqual(['serving', 'stopping', 'stopped']);
    expect(lines.map((l) => l.msg)).toEqual(['listening', 'stopping', 'stopped']);
    expect(lines[1]!.fields).toEqual({ graceMs: 5000, inFlight: 0 });
    expect(lines[2]!.fields).toEqual({ unfinished: 0 });
    expect(server.listening).toBe(false);
  });

  it('a listen conflict closes the listeners already bound and unwinds every resource, then rejects', async () => {
    const busy = await occupied();
    try {
      const { logger } = recorder();
      const closed: string[] = [];
      const life = new ServiceLifecycle({ logger, graceMs: 1000 });
      life.own('store', 'db', () => closed.push('store'));
      life.own('timer', 't', () => closed.push('timer'));
      const first = createServer();
      const port = (busy.address() as { port: number }).port;
      const attempt = life.listen([
        { what: 'HTTP', server: first, addr: { host: '127.0.0.1', port: 0 } },
        { what: 'TCP', server: createServer(), addr: { host: '127.0.0.1', port } },
      ]);
      await expect(attempt).rejects.toThrow(ListenError);
      await expect(attempt).rejects.toThrow(`cannot listen for TCP on 127.0.0.1:${port}: address already in use`);
      expect(first.listening).toBe(false);
      expect(closed).toEqual(['timer', 'store']);
      expect(life.state).toBe('stopped');
    } finally {
      busy.close();
    }
  });

  it('a failed opening closes what was opened before it', async () => {
    const { logger } = recorder();
    const closed: string[] = [];
    const life = new ServiceLifecycle({ logger, graceMs: 1000 });
    life.own('a', 1, () => closed.push('a'));
    await expect(
      life.open(
        'b',
        () => {
          throw new Error('cannot open b');
        },
        () => closed.push('b'),
      ),
    ).rejects.toThrow('cannot open b');
    expect(closed).toEqual(['a']);
  });

  it('bounds the drain by the grace and each closing step by its limit; a failed step fails the stop, the others still run', async () => {
    const { lines, logger } = recorder();
    const closed: string[] = [];
    const life = new ServiceLifecycle({ logger, graceMs: 100, stepMs: 100 });
    life.own('last', 0, () => closed.push('last'));
    life.own('broken', 0, () => {
      throw new Error('disk gone');
    });
    life.own('stuck', 0, () => new Promise(() => {}), 50);
    life.onStop({ drain: () => new Promise(() => {}) });
    const t0 = Date.now();
    await expect(life.stop()).rejects.toThrow('disk gone');
    // Never a hang: the drain (100 + 100 ms) and the stuck close (50 ms) were left behind.
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(closed).toEqual(['last']);
    expect(life.state).toBe('stopped');
    const warned = lines.filter((l) => l.level === 'warn').map((l) => [l.msg, l.fields?.step]);
    expect(warned).toEqual([
      ['stop step took too long; left behind', 'drain'],
      ['stop step took too long; left behind', 'stuck'],
      ['stop step failed', 'broken'],
    ]);
    expect(lines.at(-1)!.msg).toBe('stopped');
  });

  it('waits for a close that bounds itself (no limit), however long the step limit', async () => {
    const { lines, logger } = recorder();
    const life = new ServiceLifecycle({ logger, graceMs: 0, stepMs: 20 });
    let done = false;
    life.own(
      'child process',
      0,
      async () => {
        await new Promise((r) => setTimeout(r, 200));
        done = true;
      },
      Number.POSITIVE_INFINITY,
    );
    await life.stop();
    expect(done).toBe(true);
    expect(lines.filter((l) => l.level === 'warn')).toEqual([]);
  });

  it('a stop during loading never becomes serving', async () => {
    const life = new ServiceLifecycle({ logger: recorder().logger, graceMs: 0 });
    const stopping = life.stop();
    expect(life.stopping).toBe(true);
    life.serving();
    await stopping;
    expect(life.state).toBe('stopped');
  });

  it('tells the service manager its state: serving as READY=1 with STATUS=serving WHAT, stopping as STOPPING=1', async () => {
    const sent: string[] = [];
    const notifier = {
      target: null,
      watchdogMs: null,
      ready: (status: string) => sent.push(`ready ${status}`),
      status: (status: string) => sent.push(`status ${status}`),
      stopping: (status?: string) => sent.push(`stopping ${status}`),
      close: () => {},
    };
    const life = new ServiceLifecycle({
      logger: recorder().logger,
      graceMs: 0,
      onState: followLifecycle(notifier, '+15550000001'),
    });
    expect(sent).toEqual([]); // loading: nothing said yet
    life.serving();
    await life.stop();
    expect(sent).toEqual(['ready serving +15550000001', 'stopping stopping']);
  });
});
