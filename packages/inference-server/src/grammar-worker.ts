/**
 * The grammar worker (a worker thread of the server): builds the GBNF text of a JSON schema and
 * checks the functions of a `tools` list, off the event loop. This is the step that can take long:
 * node-llama-cpp writes grammar text in JavaScript, and a small schema can expand to an exponential
 * amount of work; the native parse of the text is fast. The server gives each job a time and a
 * heap budget and terminates this thread when a job passes it (grammar-builder.ts).
 *
 * Messages in: { id, kind: 'schema', schema } → { id, text }; { id, kind: 'tools', functions } →
 * { id, text: '' } once every function's parameter grammar and documentation are built;
 * { id, error } when node-llama-cpp refuses the schema. Posts { ready: true } once loaded.
 */
import { parentPort } from 'node:worker_threads';
import { fixIntegerGrammar } from './integer-grammar.js';

type Schema = Record<string, unknown>;
interface GrammarModules {
  getGbnfGrammarForGbnfJsonSchema(schema: Schema): string;
  documentFunctions(functions: Record<string, { description?: string; params?: Schema }>): string;
}

async function load(): Promise<GrammarModules> {
  const entry = import.meta.resolve('node-llama-cpp');
  const gbnf = (await import(new URL('./utils/gbnfJson/getGbnfGrammarForGbnfJsonSchema.js', entry).href)) as {
    getGbnfGrammarForGbnfJsonSchema: GrammarModules['getGbnfGrammarForGbnfJsonSchema'];
  };
  const docs = (await import(
    new URL('./chatWrappers/utils/ChatModelFunctionsDocumentationGenerator.js', entry).href
  )) as {
    ChatModelFunctionsDocumentationGenerator: new (
      f: unknown,
    ) => { getTypeScriptFunctionSignatures(o: { documentParams: boolean }): string };
  };
  // The same integer rule as the server's (the text must be the grammar the server would build).
  await fixIntegerGrammar();
  return {
    getGbnfGrammarForGbnfJsonSchema: gbnf.getGbnfGrammarForGbnfJsonSchema,
    documentFunctions: (functions) =>
      new docs.ChatModelFunctionsDocumentationGenerator(functions).getTypeScriptFunctionSignatures({
        documentParams: true,
      }),
  };
}

type Job =
  | { id: number; kind: 'schema'; schema: Schema }
  | { id: number; kind: 'tools'; functions: Record<string, { description?: string; params?: Schema }> };

const port = parentPort;
if (port) {
  const modules = await load();
  port.on('message', (job: Job) => {
    try {
      if (job.kind === 'schema') {
        port.postMessage({ id: job.id, text: modules.getGbnfGrammarForGbnfJsonSchema(job.schema) });
        return;
      }
      for (const f of Object.values(job.functions)) if (f.params) modules.getGbnfGrammarForGbnfJsonSchema(f.params);
      modules.documentFunctions(job.functions);
      port.postMessage({ id: job.id, text: '' });
    } catch (err) {
      port.postMessage({ id: job.id, error: err instanceof Error ? err.message : String(err) });
    }
  });
  port.postMessage({ ready: true });
}
