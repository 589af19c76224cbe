/**
 * Builds grammars in the grammar worker (grammar-worker.ts), one job at a time, each within a time
 * and a heap budget: a job that passes either is refused with 400 "schema too complex" and the
 * worker is terminated (a new one starts for the next job), so a schema that would take hours or
 * gigabytes costs the server its budget and nothing more, and the event loop keeps answering.
 * Jobs wait in a bounded queue (429 beyond); `close()` ends the worker and fails what waits.
 */
import { Worker } from 'node:worker_threads';
import { ApiError, EndReason, GrammarWorkerError, QueueFullError } from './errors.js';
import { schemaTooComplex } from './limits.js';
import type { Logger } from './logger.js';

export interface GrammarBudget {
  /** A job not done within this (from when the worker starts it) is refused. */
  readonly timeoutMs: number;
  /** The worker's heap (old generation), MiB. */
  readonly memoryMb: number;
  /** Jobs that may wait for the worker; more get 429. */
  readonly maxWaiting: number;
}

export type GrammarJob =
  | { readonly kind: 'schema'; readonly schema: Record<string, unknown> }
  | { readonly kind: 'tools'; readonly functions: Record<string, unknown> };

interface Pending {
  readonly id: number;
  readonly job: GrammarJob;
  /** The field named in a refusal. */
  readonly param: string;
  resolve(text: string): void;
  reject(err: unknown): void;
}

/** The built worker next to this module (`dist/`), also when this runs from its source. */
const WORKER_URL = import.meta.url.endsWith('.ts')
  ? new URL('../dist/grammar-worker.js', import.meta.url)
  : new URL('./grammar-worker.js', import.meta.url);

export class GrammarBuilder {
  private worker: Worker | null = null;
  private ready = false;
  private running: Pending | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly waiting: Pending[] = [];
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly budget: GrammarBudget,
    private readonly logger: Logger,
  ) {}

  /** Starts the worker now (it takes a moment to load), so that the first request does not wait. */
  warm(): void {
    if (!this.closed) this.spawn();
  }

  /**
   * The GBNF text of a schema (`kind: 'schema'`), or '' once a tools list is checked. Rejects with
   * ApiError 400 naming `param` (too complex, or refused by node-llama-cpp), or 429 when full.
   */
  build(job: GrammarJob, param: string): Promise<string> {
    if (this.closed) return Promise.reject(new EndReason('shutdown', 'the server is stopping'));
    if (this.waiting.length >= this.budget.maxWaiting) {
      return Promise.reject(new QueueFullError(this.waiting.length, 1));
    }
    return new Promise((resolve, reject) => {
      this.waiting.push({ id: this.nextId++, job, param, resolve, reject });
      this.next();
    });
  }

  /** Ends the worker; what runs or waits is rejected. Safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    const reason = new EndReason('shutdown', 'the server is stopping');
    for (const p of this.waiting.splice(0)) p.reject(reason);
    this.finish(null, reason);
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate().catch(() => {});
  }

  private spawn(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(WORKER_URL, {
      resourceLimits: { maxOldGenerationSizeMb: this.budget.memoryMb, maxYoungGenerationSizeMb: 32 },
      stdout: false,
      stderr: false,
    });
    // Never what keeps the process alive.
    w.unref();
    this.worker = w;
    this.ready = false;
    w.on('message', (m: { ready?: true; id?: number; text?: string; error?: string }) => {
      if (w !== this.worker) return;
      if (m.ready) {
        this.ready = true;
        this.next();
        return;
      }
      const p = this.running;
      if (!p || p.id !== m.id) return;
      if (m.error !== undefined) {
        this.finish(
          null,
          new ApiError(400, `Invalid '${p.param}': ${m.error}`, 'invalid_request_error', p.param, 'unsupported_value'),
        );
      } else this.finish(m.text ?? '', null);
      this.next();
    });
    w.on('error', (err: Error & { code?: string }) => {
      if (w !== this.worker) return;
      const p = this.running;
      const oom = err.code === 'ERR_WORKER_OUT_OF_MEMORY';
      if (!oom) this.logger.warn('grammar worker failed', { error: err.message });
      this.worker = null;
      if (p) {
        this.finish(
          null,
          oom
            ? schemaTooComplex(p.param, `its grammar needs more than ${this.budget.memoryMb} MiB (--grammar-memory)`)
            : err,
        );
      }
      this.next();
    });
    w.on('exit', () => {
      if (w !== this.worker) return;
      // An exit nobody asked for: the running job fails, the next one gets a new worker.
      this.worker = null;
      this.finish(null, new GrammarWorkerError());
      this.next();
    });
    return w;
  }

  /** Settles the running job (if any) and stops its timer. */
  private finish(text: string | null, err: unknown): void {
    const p = this.running;
    this.running = null;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!p) return;
    if (err !== null) p.reject(err);
    else p.resolve(text ?? '');
  }

  private next(): void {
    if (this.closed || this.running || this.waiting.length === 0) return;
    const w = this.spawn();
    if (!this.ready) return;
    const p = this.waiting.shift()!;
    this.running = p;
    this.timer = setTimeout(() => this.overBudget(w, p), this.budget.timeoutMs);
    this.timer.unref();
    w.postMessage({ id: p.id, ...p.job });
  }

  /** The running job passed its time: refused, and the worker (still busy with it) terminated. */
  private overBudget(w: Worker, p: Pending): void {
    if (this.running !== p) return;
    this.logger.warn('grammar over budget: refused', { param: p.param, timeoutMs: this.budget.timeoutMs });
    this.worker = null;
    this.finish(
      null,
      schemaTooComplex(
        p.param,
        `its grammar was not built within ${this.budget.timeoutMs / 1000} s (--grammar-timeout)`,
      ),
    );
    void w.terminate().catch(() => {});
    this.next();
  }
}
