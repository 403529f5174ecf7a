// llama.cpp (node-llama-cpp) batch-1 decode tokens/s on a GGUF file: a short prompt, then
// N greedy tokens timed after the first one (the prefill), on `threads` threads. Prints one
// JSON line. Used for the same-file comparison in docs/performance.md.
import {getLlama} from "node-llama-cpp";
const [modelPath, n = "64", threads = "1"] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 512, threads: Number(threads),
                                           batchSize: 512});
const seq = context.getSequence();
const prompt = [5, 17, 300, 42, 9, 77, 1, 260];
let t0 = 0, count = 0;
for await (const t of seq.evaluate(prompt, {temperature: 0})) {
  if (count === 0) t0 = performance.now();
  if (++count > Number(n)) break;
}
const s = (performance.now() - t0) / 1000;
console.log(JSON.stringify({decode_tokens: Number(n), seconds: s, tok_per_s: Number(n) / s}));
process.exit(0);
