// Stop strings across streamed deltas: hold back possible prefixes, cut at the first stop.
import { expect, test } from "bun:test";
import { StopStringMatcher } from "../../../lib/model/stop_strings.ts";
import { rng } from "../../helpers/bf16.ts";

function run(stops: string[], deltas: string[], includeStopString = false) {
  const m = new StopStringMatcher(stops, { includeStopString });
  const emitted: string[] = [];
  for (const d of deltas) {
    const r = m.push(d);
    emitted.push(r.text);
    if (r.stop !== null) return { emitted, text: emitted.join(""), stop: r.stop };
  }
  emitted.push(m.flush());
  return { emitted, text: emitted.join(""), stop: null };
}

test("text that may start a stop string is held back, then released when it cannot", () => {
  const m = new StopStringMatcher(["</end>"]);
  expect(m.push("hello </")).toEqual({ text: "hello ", stop: null });
  expect(m.push("en")).toEqual({ text: "", stop: null });
  expect(m.push("ough")).toEqual({ text: "</enough", stop: null });
  expect(m.push("<")).toEqual({ text: "", stop: null });
  expect(m.flush()).toBe("<");
});

test("a stop string split across deltas stops the stream and drops what follows", () => {
  const r = run(["STOP"], ["abc S", "T", "OP and more", "ignored"]);
  expect(r.text).toBe("abc ");
  expect(r.stop).toBe("STOP");
  expect(run(["STOP"], ["abc S", "TOP!"], true).text).toBe("abc STOP");
  const m = new StopStringMatcher(["x"]);
  expect(m.push("axb").stop).toBe("x");
  expect(m.push("more")).toEqual({ text: "", stop: "x" });
  expect(m.flush()).toBe("");
});

test("the earliest stop wins; at the same start the longer one", () => {
  expect(run(["world", "lo w"], ["hello world"]).stop).toBe("lo w");
  expect(run(["ab", "abc"], ["xxabcd"], true)).toMatchObject({ text: "xxabc", stop: "abc" });
});

test("matches a brute-force reference on random streams", () => {
  const r = rng(99);
  const alphabet = "ab\u00e9\u4e16";
  for (let trial = 0; trial < 300; trial++) {
    const pick = (n: number) => Array.from({ length: n }, () => alphabet[Math.floor(r() * alphabet.length)]).join("");
    const stops = Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(1 + Math.floor(r() * 4)));
    const full = pick(Math.floor(r() * 30));
    const deltas: string[] = [];
    for (let i = 0; i < full.length;) {
      const k = Math.floor(r() * 4);
      deltas.push(full.slice(i, i + k));
      i += k;
    }
    let cut = -1;
    for (const s of stops) {
      const i = full.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    const out = run(stops, deltas);
    expect(out.text).toBe(cut < 0 ? full : full.slice(0, cut));
    expect(out.stop !== null).toBe(cut >= 0);
    // Never emits text that later turns out to belong to a stop string.
    expect(full.startsWith(out.text)).toBe(true);
  }
});

test("empty stop strings are rejected by index", () => {
  expect(() => new StopStringMatcher(["ok", ""])).toThrow(/at index 1/);
});

test("unarmed text never stops the stream but keeps its held-back tail: a stop string straddling arming stops it", () => {
  const m = new StopStringMatcher(["STOP"]);
  expect(m.push("a STOP b S", false)).toEqual({ text: "a STOP b ", stop: null });
  expect(m.push("TO", false)).toEqual({ text: "", stop: null });
  expect(m.push("P!")).toEqual({ text: "", stop: "STOP" });
  const late = new StopStringMatcher(["STOP"]);
  expect(late.push("xSTOP", false)).toEqual({ text: "xSTOP", stop: null });
  expect(late.push("y")).toEqual({ text: "y", stop: null });
});
