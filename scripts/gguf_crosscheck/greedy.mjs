// Greedy tokens from llama.cpp (node-llama-cpp) for a GGUF file and a token-id prompt.
import {getLlama} from "node-llama-cpp";
const [modelPath, promptIds, n] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: 512, threads: 1, batchSize: 512});
const seq = context.getSequence();
const prompt = promptIds.split(",").map(Number);
const out = [];
for await (const t of seq.evaluate(prompt, {temperature: 0})) {
  out.push(t);
  if (out.length >= Number(n)) break;
}
console.log(out.join(","));
process.exit(0);
