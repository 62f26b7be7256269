// A stand-in for the Workers AI binding, loaded by Miniflare as the `AI` wrapped binding of the
// agent Worker (Workers AI cannot be reached offline). `env.AI.run(model, inputs, options)`
// behaves like the real binding's surface: it resolves to the SSE `ReadableStream` when
// `inputs.stream` is true, to the parsed object otherwise, and throws `Error(message)` when the
// model fails. What the model answers comes from the test's Node handler (`NODE`), which gets
// the call as JSON and answers with the SSE body, or a non-200 status whose text is the error.
export default function (env) {
  return {
    async run(model, inputs, options) {
      const res = await env.NODE.fetch("http://workers-ai/run", {
        method: "POST",
        body: JSON.stringify({ model, inputs, options: options ?? null }),
      });
      if (res.status !== 200) throw new Error(await res.text());
      return inputs?.stream ? res.body : await res.json();
    },
  };
}
