// What every inference benchmark does around its run: `cleanup` (its servers killed, its temporary
// directory removed) on exit and on SIGINT/SIGTERM, and a limit on the whole run, past which it
// says so and stops with exit 1.
export function guardRun(cleanup, timeoutMs, log, message = `the run took more than ${timeoutMs / 1000} s: stopping`) {
  process.on('exit', cleanup);
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      cleanup();
      process.exit(1);
    });
  }
  setTimeout(() => {
    log(message);
    cleanup();
    process.exit(1);
  }, timeoutMs).unref();
}
