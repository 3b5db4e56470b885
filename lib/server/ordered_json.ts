/**
 * JSON whose objects keep their keys in the order given. A JavaScript object lists integer-like
 * keys first in ascending order whatever the insertion order, but vLLM's logprob maps are Python
 * dicts keyed by token id in their own order (the prompt token first, then by rank), and clients
 * may read the first key as the prompt token. An {@link OrderedObject} is written key by key.
 * @module
 */

/** An object written with its keys in this order. */
export class OrderedObject {
  constructor(readonly entries: ReadonlyArray<readonly [string, unknown]>) {}
}

/** JSON text of `v` as JSON.stringify writes it, except that OrderedObjects keep their key order. */
function orderedJson(v: unknown): string {
  if (v instanceof OrderedObject) {
    return `{${v.entries.map(([k, x]) => `${JSON.stringify(k)}:${orderedJson(x)}`).join(",")}}`;
  }
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? "null" : orderedJson(x))).join(",")}]`;
  if (v === null || typeof v !== "object" || typeof (v as { toJSON?: unknown }).toJSON === "function") {
    return JSON.stringify(v) ?? "null";
  }
  const fields = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined);
  return `{${fields.map(([k, x]) => `${JSON.stringify(k)}:${orderedJson(x)}`).join(",")}}`;
}

/** A JSON response of `body` (Response.json's headers), OrderedObjects in their order. */
export function orderedJsonResponse(body: unknown): Response {
  return new Response(orderedJson(body), { headers: { "content-type": "application/json;charset=utf-8" } });
}
