// Token ids llama.cpp (node-llama-cpp) gives a text with a GGUF file's tokenizer.
import {getLlama} from "node-llama-cpp";
const [modelPath, text] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, vocabOnly: true});
console.log(Array.from(model.tokenize(text, true)).join(","));
process.exit(0);
