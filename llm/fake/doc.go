// Package fake runs in-process fake model providers for CI and for anyone
// without keys. Each Server is an httptest server that speaks one
// provider's real wire format, so the llm adapters and the official SDKs
// under them run the same code paths as against the real API:
//
//   - Anthropic: POST /v1/messages; x-api-key or Authorization: Bearer;
//     anthropic-version required; tool_use / tool_result blocks, every
//     tool_use answered in the next message; sampling parameters refused as
//     the 2026-10-21 API version does; msg_/toolu_ ids, stop_reason
//     end_turn or tool_use, usage; errors {"type":"error","error":{…}}.
//   - OpenAI: POST /v1/chat/completions; Authorization: Bearer; tool
//     messages must answer the previous assistant tool_calls; chatcmpl-/call_
//     ids, finish_reason stop or tool_calls, usage; errors {"error":{…}}.
//   - Google: POST /v1beta/models/{model}:generateContent; x-goog-api-key;
//     functionCall / functionResponse parts matched by name; finishReason,
//     usageMetadata; errors {"error":{"code","message","status","details"}}.
//     A bad key is 400 INVALID_ARGUMENT with reason API_KEY_INVALID, as
//     the real API answers (the adapter classifies it as an auth error).
//
// Every answer is application/json. A request of the wrong shape gets a 400
// in the provider's format, a wrong key its auth error. Inject queues
// faults for the next requests: a status (429 with Retry-After or Gemini's
// RetryInfo, 500, 503, 529) or malformed output (tool arguments that are
// not a JSON object; Gemini's MALFORMED_FUNCTION_CALL).
//
// # The policy and how it learns what to call
//
// A Server asks its Policy for each answer, given the conversation decoded
// from the wire (system prompt, messages with tool calls and results, tool
// schemas, response schema). Model is the generic policy, with a
// Temperament: Careful (idempotency key, retries only with the same key,
// reports failure), RetriesWithoutKey, ClaimsSuccess (reports success on
// error) and FollowsInjected (also does what instructions in tool answers
// say).
//
// Model understands no words. It learns what to call from a plan the task's
// author writes into the task message between <agent-plan> tags (Plan.Text):
// the steps (tool name and JSON arguments, optionally the argument that
// carries an idempotency key) and, for FollowsInjected, rules that turn text
// in a tool answer (a regular expression) into more steps. A real model
// reads the plan as a harmless note; a run against a real provider may
// leave it out. Whether a tool takes an idempotency key is read from its
// schema (a property named "idempotency_key", or the step's key_param), so
// a careful model sends one only where the tool declares it. Tool answers
// are read in the llm.ToolOutcome format ({"status":503,"body":…} or
// {"error":"timeout: …"}); the loop package writes them so.
//
// Model keeps no state: every answer is computed from the conversation it
// is sent, so a turn repeated after a crash gets the same answer, and
// replays are deterministic. Turns that ask for structured output (the
// model judge's) are answered by RuleJudge: the verdict the rule judge
// gives on the trajectory in the prompt.
package fake
