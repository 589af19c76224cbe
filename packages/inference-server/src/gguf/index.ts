/** GGUF: the format, the model writer (`make-model`) and the reader the server checks models with. */
export { GgufError } from '../errors.js';
export * from './format.js';
export * from './reader.js';
export * from './vocabulary.js';
export * from './writer.js';
