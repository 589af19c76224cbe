/**
 * node-llama-cpp 3.22's grammar for a JSON-schema "integer" allows an exponent (`5e-3`), which is
 * not an integer: its own check of a function call's arguments then throws, and structured output
 * could break its schema. This replaces that one rule with integers as JSON writes them, without
 * an exponent, at most 15 digits (safe integers). Checked before use; a node-llama-cpp without
 * that class leaves it as it is and says so.
 */
interface GbnfNumberClass {
  prototype: { getGrammar(this: { allowFractional: boolean }): string; __vigilInteger?: true };
}

export const INTEGER_GRAMMAR = '"-"? ("0" | [1-9] [0-9]{0,14})';

/** Patches the integer rule once; returns whether the rule is the fixed one. */
export async function fixIntegerGrammar(): Promise<boolean> {
  try {
    const entry = import.meta.resolve('node-llama-cpp');
    const url = new URL('./utils/gbnfJson/terminals/GbnfNumber.js', entry).href;
    const mod = (await import(url)) as { GbnfNumber?: GbnfNumberClass };
    const proto = mod.GbnfNumber?.prototype;
    if (!proto || typeof proto.getGrammar !== 'function') return false;
    if (proto.__vigilInteger) return true;
    const original = proto.getGrammar;
    proto.getGrammar = function (this: { allowFractional: boolean }) {
      return this.allowFractional ? original.call(this) : INTEGER_GRAMMAR;
    };
    proto.__vigilInteger = true;
    return true;
  } catch {
    return false;
  }
}
