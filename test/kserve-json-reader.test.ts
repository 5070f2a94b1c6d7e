// JSON from the network read with a budget (lib/kserve/json-reader.ts): the
// same values and the same refusals as JSON.parse, bounds before anything is
// built, and the large `data` arrays of inference inputs left to parse.
import { describe, expect, it, vi } from 'vitest';
import { decodeHttpInferRequest } from '../lib/kserve/codec.js';
import { JsonData, MAX_JSON_DEPTH, parseNetworkJson } from '../lib/kserve/json-reader.js';
import { MAX_REQUEST_PARTS } from '../lib/kserve/infer-wire.js';

const VALID = [
  '{}',
  '[]',
  ' \t\r\n{ "a" : [ 1 , -2.5e3 , 0 , -0 , 1E+2 , 3e-2 , true , false , null ] } \n',
  '"plain"',
  '"escapes: \\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00 \\ud800"',
  '"héllo wörld ✓ 😀"',
  '{"inputs":[{"name":"X","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4]]}],"outputs":[{"name":"Y","parameters":{"binary_data":true}}]}',
  '{"a":{"a":{"a":{"b":[[[[[]]]]]}}},"a":1}',
  '0',
  '-12345678901234567890',
  '[1.7976931348623157e308, 5e-324, 123456789012345678901234567890]',
];

/** Whether JSON.parse takes the text (as the JS handler read it before: the bytes as UTF-8). */
function parses(bytes: Buffer): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(bytes.toString('utf8')) };
  } catch {
    return { ok: false };
  }
}

function mine(bytes: Buffer): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: parseNetworkJson(bytes) };
  } catch (error) {
    expect((error as { code?: string }).code).toBe('INVALID_ARG');
    return { ok: false, message: (error as Error).message };
  }
}

describe('parseNetworkJson', () => {
  it('reads what JSON.parse reads, to the same values', () => {
    for (const text of VALID) expect(parseNetworkJson(Buffer.from(text))).toEqual(JSON.parse(text));
  });

  it('refuses what JSON.parse refuses, saying where', () => {
    const cases: Array<[string, string]> = [
      ['', 'unexpected end of JSON at byte 0'],
      ['{', 'unexpected end of JSON at byte 1'],
      ['{"a" 1}', "unexpected '1' at byte 5, expected ':'"],
      ['[1,]', "unexpected ']' at byte 3, expected a value"],
      ['[1 2]', "unexpected '2' at byte 3, expected ',' or ']'"],
      ['{"a":1,}', "unexpected '}' at byte 7, expected a key"],
      ['01', "unexpected '1' at byte 1, expected the end of the JSON"],
      ['-', 'unexpected end of JSON at byte 1'],
      ['1.', 'unexpected end of JSON at byte 2'],
      ['1e+', 'unexpected end of JSON at byte 3'],
      ['.5', "unexpected '.' at byte 0, expected a value"],
      ['+1', "unexpected '+' at byte 0, expected a value"],
      ['tru', 'unexpected end of JSON at byte 3'],
      ['nul!', "unexpected '!' at byte 3, expected 'null'"],
      ['"a\\x"', "unexpected 'x' at byte 3, expected an escape"],
      ['"\\u12g4"', "unexpected 'g' at byte 5, expected a hex digit"],
      ['"tab\there"', 'unexpected byte 0x09 at byte 4, expected a character (control characters are escaped in JSON strings)'],
      ['"open', 'unexpected end of JSON at byte 5'],
      ['\ufeff{}', 'unexpected byte 0xef at byte 0, expected a value'],
      ['{} {}', "unexpected '{' at byte 3, expected the end of the JSON"],
      ["{'a':1}", "unexpected ''' at byte 1, expected a key"],
      ['NaN', "unexpected 'N' at byte 0, expected a value"],
    ];
    for (const [text, message] of cases) {
      expect(parses(Buffer.from(text)).ok).toBe(false);
      expect(mine(Buffer.from(text))).toEqual({ ok: false, message: `failed to parse the request JSON buffer: ${message}` });
    }
  });

  it('agrees with JSON.parse on 20,000 mutations of valid requests', () => {
    let state = 7;
    const random = (n: number): number => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state % n;
    };
    const alphabet = Buffer.from('{}[]",:.-+eE0123456789 \\u\t\nabtrfnl\u0000\u00ff\u0080');
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      const bytes = Buffer.from(VALID[random(VALID.length)]!);
      for (let m = 1 + random(3); m > 0 && bytes.length > 0; m--) bytes[random(bytes.length)] = alphabet[random(alphabet.length)]!;
      const reference = parses(bytes);
      const result = mine(bytes);
      expect({ text: bytes.toString('latin1'), ok: result.ok }).toEqual({ text: bytes.toString('latin1'), ok: reference.ok });
      if (reference.ok && result.ok) expect(result.value).toEqual(reference.value);
      else refused++;
    }
    expect(refused).toBeGreaterThan(5_000); // the mutations made invalid text too, not only other valid text
  });

  it(`refuses more than ${MAX_REQUEST_PARTS} values, and nesting deeper than ${MAX_JSON_DEPTH}, before building anything`, () => {
    const array = (n: number): Buffer => Buffer.from(`[${Array(n).fill('0').join(',')}]`);
    expect((parseNetworkJson(array(MAX_REQUEST_PARTS - 1)) as unknown[]).length).toBe(MAX_REQUEST_PARTS - 1);
    expect(() => parseNetworkJson(array(MAX_REQUEST_PARTS))).toThrow(`failed to parse the request JSON buffer: more than ${MAX_REQUEST_PARTS} values outside tensor data`);
    // keys count as values: 32,768 entries are 65,536 parts and the object one more
    const object = (n: number): Buffer => Buffer.from(`{${Array.from({ length: n }, (_, i) => `"k${i}":0`).join(',')}}`);
    expect(() => parseNetworkJson(object(MAX_REQUEST_PARTS / 2))).toThrow('more than');
    expect(Object.keys(parseNetworkJson(object(MAX_REQUEST_PARTS / 2 - 1)) as object)).toHaveLength(MAX_REQUEST_PARTS / 2 - 1);
    const nested = (n: number): Buffer => Buffer.from(`${'['.repeat(n)}${']'.repeat(n)}`);
    expect(parseNetworkJson(nested(MAX_JSON_DEPTH + 1))).toBeInstanceOf(Array);
    expect(() => parseNetworkJson(nested(MAX_JSON_DEPTH + 2))).toThrow(`nested deeper than ${MAX_JSON_DEPTH} levels`);
    // a million levels: refused at the bound, no stack overflow
    expect(() => parseNetworkJson(nested(1_000_000))).toThrow('nested deeper');
    expect(() => parseNetworkJson(Buffer.from('"x"'), { what: "the 'config' of model 'm'" })).not.toThrow();
    expect(() => parseNetworkJson(Buffer.from('{'), { what: "the 'config' of model 'm'" })).toThrow("failed to parse the 'config' of model 'm': unexpected end");
  });

  it('reads only [start, end): a JSON header followed by binary data', () => {
    const bytes = Buffer.concat([Buffer.from('{"a":10}'), Buffer.from('5"}garbage')]);
    expect(parseNetworkJson(bytes, { end: 8 })).toEqual({ a: 10 });
    // a number, a literal and a string cut by the end are not read on into the binary part
    expect(() => parseNetworkJson(bytes, { end: 6 })).toThrow('unexpected end of JSON at byte 6');
    expect(() => parseNetworkJson(Buffer.from('[tr]ue'), { end: 3 })).toThrow('unexpected end of JSON at byte 3');
    expect(() => parseNetworkJson(Buffer.from('"ab"'), { end: 3 })).toThrow('unexpected end of JSON at byte 3');
  });
});

describe('parseNetworkJson of an inference request', () => {
  const request = (data: string, extra = ''): Buffer =>
    Buffer.from(`{"inputs":[{"name":"X","datatype":"FP32","shape":[1],"data":${data}}${extra}],"outputs":[]}`);
  const inputs = (value: unknown): Array<{ data: unknown }> => (value as { inputs: Array<{ data: unknown }> }).inputs;

  it('parses small data arrays with the request and leaves large ones counted, unparsed', () => {
    expect(inputs(parseNetworkJson(request('[1,2,3]'), { inference: true }))[0]!.data).toEqual([1, 2, 3]);
    const values = Array.from({ length: 5000 }, (_, i) => i);
    const nested = `[${[values.slice(0, 2500), values.slice(2500)].map((half) => JSON.stringify(half)).join(',')}]`;
    const data = inputs(parseNetworkJson(request(nested), { inference: true }))[0]!.data as JsonData;
    expect(data).toBeInstanceOf(JsonData);
    expect(data.count).toBe(5000);
    expect(data.parse()).toEqual([values.slice(0, 2500), values.slice(2500)]);
    // not inference: the same text is a plain value (and its 5,003 values are within the budget)
    expect(inputs(parseNetworkJson(request(nested)))[0]!.data).toEqual([values.slice(0, 2500), values.slice(2500)]);
  });

  it('counts tensor values apart from the budget, but not the arrays and objects inside data', () => {
    const many = `[${Array(MAX_REQUEST_PARTS * 4).fill('0').join(',')}]`;
    expect((inputs(parseNetworkJson(request(many), { inference: true }))[0]!.data as JsonData).count).toBe(MAX_REQUEST_PARTS * 4);
    const emptyArrays = `[${Array(MAX_REQUEST_PARTS).fill('[]').join(',')}]`;
    expect(() => parseNetworkJson(request(emptyArrays), { inference: true })).toThrow('more than');
  });

  it('resolves duplicate keys as JSON.parse does: the last inputs, the last data', () => {
    const big = `[${Array(2000).fill('7').join(',')}]`;
    const text = Buffer.from(`{"inputs":[{"name":"A","data":${big}}],"inputs":[{"name":"B","data":${big},"data":[1]}]}`);
    const read = inputs(parseNetworkJson(text, { inference: true }));
    expect(read).toEqual([{ name: 'B', data: [1] }]);
  });

  it('a string that looks like a cut-out array is only a string', () => {
    const read = inputs(parseNetworkJson(request('"\\u0000data 0"', `,{"name":"Y","data":[${Array(2000).fill('1').join(',')}]}`), { inference: true }));
    expect(read[0]!.data).toBe('\u0000data 0');
    expect((read[1]!.data as JsonData).count).toBe(2000);
  });
});

describe('decodeHttpInferRequest with large JSON data', () => {
  const body = (shape: number[], count: number): Buffer =>
    Buffer.from(`{"inputs":[{"name":"X","datatype":"INT32","shape":${JSON.stringify(shape)},"data":[${Array.from({ length: count }, (_, i) => i).join(',')}]}]}`);

  it('compares the count with the shape before parsing the data, and parses it once when they agree', () => {
    const parse = vi.spyOn(JsonData.prototype, 'parse');
    try {
      expect(() => decodeHttpInferRequest(body([1], 100_000), undefined)).toThrow("unable to parse 'data' of input 'X': expected 1 elements for shape [1], got 100000");
      expect(parse).not.toHaveBeenCalled();
      const decoded = decodeHttpInferRequest(body([2, 50_000], 100_000), undefined);
      expect(parse).toHaveBeenCalledTimes(1);
      const data = (decoded.request.inputs as unknown as Record<string, { data: number[] }>).X!.data;
      expect(data).toHaveLength(100_000);
      expect(data[99_999]).toBe(99_999);
    } finally {
      parse.mockRestore();
    }
  });
});
