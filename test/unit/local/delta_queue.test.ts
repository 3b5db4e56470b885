// DeltaQueue: buffered and waiting reads, close, fail.
import { expect, test } from "bun:test";
import { DeltaQueue } from "../../../lib/local/delta_queue.ts";

test("items pushed before and after the reader waits arrive in order, then close ends it", async () => {
  const q = new DeltaQueue<number>();
  q.push(1);
  const got: number[] = [];
  const reader = (async () => {
    for await (const x of q) got.push(x);
  })();
  await Promise.resolve();
  q.push(2);
  setTimeout(() => {
    q.push(3);
    q.close();
    q.push(4); // ignored after close
  }, 1);
  await reader;
  expect(got).toEqual([1, 2, 3]);
});

test("fail rejects a waiting reader, after buffered items are drained", async () => {
  const q = new DeltaQueue<string>();
  q.push("a");
  q.fail(new RangeError("boom"));
  const it = q[Symbol.asyncIterator]();
  expect(await it.next()).toEqual({ value: "a", done: false });
  await expect(it.next()).rejects.toThrow("boom");
  const w = new DeltaQueue<string>();
  const pending = w.next();
  w.fail(new Error("later"));
  await expect(pending).rejects.toThrow("later");
});
