// Chat requests rendered with the real Qwen3 chat template (the tiny test model's tokenizer), the
// way the server renders them: tools in the system prompt, assistant tool calls (arguments parsed
// from their JSON text) and tool responses, enable_thinking, continue_final_message; inline and on
// the tokenizer pool's threads alike.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ModelTokenizer } from "../../../lib/model/tokenizer.ts";
import { chatRenderOptionsOf } from "../../../lib/server/chat_render_options.ts";
import {
  INLINE_LIMIT_CHARS,
  inlinePromptTokenizer,
  pooledPromptTokenizer,
  type PromptTokenizer,
} from "../../../lib/server/prompt_tokenizer.ts";
import { chatTokenIds, type PromptContext } from "../../../lib/server/prompts.ts";
import type { ChatMessageInput } from "../../../lib/server/schemas.ts";
import { TokenizerPool } from "../../../lib/server/tokenizer_pool.ts";
import { tinyModelDir, tinyTokenizer } from "../../helpers/tiny_model_dir.ts";

let tok: ModelTokenizer;
let pooled: PromptTokenizer;

beforeAll(async () => {
  tok = await tinyTokenizer();
  pooled = pooledPromptTokenizer(tok, await TokenizerPool.start({ dir: await tinyModelDir(), threads: 1 }));
}, 120_000);
afterAll(() => pooled?.close());

const context = (tokenizer: PromptTokenizer): PromptContext => ({ tokenizer, vocabSize: 151936, maxModelLen: 1 << 20 });

const tools = [{
  type: "function",
  function: { name: "get_weather", description: "Weather of a city", parameters: { type: "object" } },
}];

const conversation: ChatMessageInput[] = [
  { role: "user", content: "Weather in Köln?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Köln"}' } }],
  },
  { role: "tool", content: "sunny", tool_call_id: "c1" },
];

async function render(messages: ChatMessageInput[], body: Record<string, unknown>, tokenizer: PromptTokenizer) {
  const ids = await chatTokenIds(messages, context(tokenizer), { ...chatRenderOptionsOf(body) });
  return tok.decode(ids);
}

describe("the Qwen3 template through the server's rendering", () => {
  test("tools, an assistant tool call and the tool's response", async () => {
    const text = await render(conversation, { tools }, inlinePromptTokenizer(tok));
    expect(text).toStartWith("<|im_start|>system\n# Tools\n");
    expect(text).toContain(
      '<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object"}}}\n</tools>',
    );
    expect(text).toContain(
      '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Köln"}}\n</tool_call><|im_end|>\n',
    );
    expect(text).toContain("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n");
    expect(text).toEndWith("<|im_start|>assistant\n");
  });

  test("enable_thinking false closes the reasoning in the prompt", async () => {
    const text = await render(conversation.slice(0, 1), { chat_template_kwargs: { enable_thinking: false } }, pooled);
    expect(text).toEndWith("<|im_start|>assistant\n<think>\n\n</think>\n\n");
  });

  test("continue_final_message leaves the last message open", async () => {
    const messages: ChatMessageInput[] = [
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "The answer is" },
    ];
    const text = await render(messages, { add_generation_prompt: false, continue_final_message: true }, pooled);
    expect(text).toEndWith("<|im_start|>assistant\n<think>\n\n</think>\n\nThe answer is");
    const empty = render([{ role: "user", content: "x" }, { role: "assistant", content: "" }], {
      add_generation_prompt: false,
      continue_final_message: true,
    }, inlinePromptTokenizer(tok));
    await expect(empty).rejects.toThrow(/continue_final_message/);
  });

  test("a large chat with tools renders the same on the pool's threads as inline", async () => {
    const big: ChatMessageInput[] = [
      { role: "user", content: "w".repeat(INLINE_LIMIT_CHARS) },
      ...conversation.slice(1),
    ];
    const body = { tools, chat_template_kwargs: { enable_thinking: false } };
    expect(await render(big, body, pooled)).toBe(await render(big, body, inlinePromptTokenizer(tok)));
  });
});
