/**
 * Start-up progress for humans: one line rewritten in place on a terminal, plain lines at every
 * 10% otherwise (logs and CI capture stay readable).
 * @module
 */

/** Where progress goes. */
export interface ProgressSink {
  write(text: string): void;
  isTTY: boolean;
}

function mb(bytes: number): string {
  return (bytes / 1e6).toFixed(1);
}

/** A byte-progress callback that prints `label  NN% (x/y MB)`; call `done()` at the end. */
export function byteProgress(
  label: string,
  sink: ProgressSink,
): { update(done: number, total: number): void; done(): void } {
  let lastDecile = -1;
  let lastTty = 0;
  let printed = false;
  return {
    update(written, total) {
      const pct = total > 0 ? Math.min(100, Math.floor((written / total) * 100)) : 100;
      const line = `${label} ${String(pct).padStart(3)}% (${mb(written)}/${mb(total)} MB)`;
      if (sink.isTTY) {
        // Redrawing costs a syscall; a few times a second is enough.
        const now = Date.now();
        if (now - lastTty < 100 && pct < 100) return;
        lastTty = now;
        sink.write(`\r${line}`);
        printed = true;
      } else if (Math.floor(pct / 10) > lastDecile) {
        lastDecile = Math.floor(pct / 10);
        sink.write(`${line}\n`);
      }
    },
    done() {
      if (sink.isTTY && printed) sink.write("\n");
    },
  };
}
