// Reads an SSE response body into its data payloads (JSON-parsed, "[DONE]" kept as a string).
export async function readSse(res: Response): Promise<unknown[]> {
  const text = await res.text();
  const events = text.split("\n\n").filter((e) => e.length > 0);
  return events.map((e) => {
    if (!e.startsWith("data: ")) throw new Error(`not an SSE data event: ${JSON.stringify(e)}`);
    const data = e.slice("data: ".length);
    return data === "[DONE]" ? data : JSON.parse(data);
  });
}
