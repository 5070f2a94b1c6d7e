import { describe, expect, it } from 'vitest';
import { TritonError } from '../lib/errors.js';
import {
  formatPbPath,
  formatPbtxt,
  parsePbtxt,
  pb,
  quotePbtxtString,
  type PbMessage,
  type PbPosition,
} from '../lib/pbtxt.js';

const INNER = pb.type('Inner', {
  label: pb.scalar('string'),
  weight: pb.scalar('float'),
  tags: pb.repeated(pb.scalar('string')),
});

const TEST: PbMessage = pb.type('Test', {
  s: pb.scalar('string'),
  by: pb.scalar('bytes'),
  b: pb.scalar('bool'),
  i32: pb.scalar('int32'),
  u32: pb.scalar('uint32'),
  i64: pb.scalar('int64'),
  u64: pb.scalar('uint64'),
  f: pb.scalar('float'),
  d: pb.scalar('double'),
  e: pb.enumOf(['ZERO', 'ONE', 'TWO']),
  rs: pb.repeated(pb.scalar('string')),
  ri: pb.repeated(pb.scalar('int64')),
  rb: pb.repeated(pb.scalar('bool')),
  re: pb.repeated(pb.enumOf(['ZERO', 'ONE', 'TWO'])),
  inner: pb.message(INNER),
  inners: pb.repeated(pb.message(INNER)),
  smap: pb.map('string', pb.scalar('string')),
  imap: pb.map('uint64', pb.message(INNER)),
  emap: pb.map('string', pb.enumOf(['ZERO', 'ONE', 'TWO'])),
});

const parse = (text: string) => parsePbtxt(text, TEST, { source: 't.pbtxt' });

/** Runs `fn` and returns the TritonError it throws (fails the test otherwise). */
function thrown(fn: () => unknown): TritonError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(TritonError);
    return err as TritonError;
  }
  throw new Error('expected a TritonError, but nothing was thrown');
}

describe('parsePbtxt: syntax', () => {
  it('skips # comments and accepts , and ; as field separators', () => {
    const v = parse('# leading comment\ns: "a" # trailing "not a string"\ni32: 5, u32: 6; b: true\n# end');
    expect(v).toEqual({ s: 'a', i32: 5, u32: 6, b: true });
  });

  it('keeps # inside strings', () => {
    expect(parse('s: "a # b"')).toEqual({ s: 'a # b' });
  });

  it('reads an empty document as an empty object', () => {
    expect(parse('')).toEqual({});
    expect(parse('  # only a comment\n\n')).toEqual({});
  });

  it('gives the list form and the repeated-field form the same value', () => {
    const listed = parse('ri: [ 1, -2, 3 ] rs: [ "a", \'b\' ]');
    const repeated = parse('ri: 1 rs: "a" ri: -2 rs: \'b\' ri: 3');
    expect(listed).toEqual({ ri: [1, -2, 3], rs: ['a', 'b'] });
    expect(repeated).toEqual(listed);
  });

  it('appends list and single forms of the same field in order', () => {
    expect(parse('ri: 1 ri: [ 2, 3 ] ri: 4')).toEqual({ ri: [1, 2, 3, 4] });
  });

  it('makes a repeated field that appears once an array', () => {
    expect(parse('ri: 7')).toEqual({ ri: [7] });
    expect(parse('inners { label: "x" }')).toEqual({ inners: [{ label: 'x' }] });
  });

  it('reads empty lists', () => {
    expect(parse('ri: [ ] inners: []')).toEqual({ ri: [], inners: [] });
  });

  it('reads nested messages with or without ":", with {} or <>', () => {
    const expected = { inner: { label: 'x', weight: 2 } };
    expect(parse('inner { label: "x" weight: 2 }')).toEqual(expected);
    expect(parse('inner: { label: "x" weight: 2 }')).toEqual(expected);
    expect(parse('inner < label: "x" weight: 2 >')).toEqual(expected);
    expect(parse('inner: <label:"x",weight:2>')).toEqual(expected);
  });

  it('reads lists of messages with or without ":"', () => {
    const expected = { inners: [{ label: 'a' }, { label: 'b', tags: ['t'] }] };
    expect(parse('inners [ { label: "a" }, < label: "b" tags: "t" > ]')).toEqual(expected);
    expect(parse('inners: [ { label: "a" }, { label: "b" tags: ["t"] } ]')).toEqual(expected);
    expect(parse('inners { label: "a" } inners { label: "b" tags: "t" }')).toEqual(expected);
  });

  it('reads empty messages', () => {
    expect(parse('inner { }')).toEqual({ inner: {} });
    expect(parse('inner <>')).toEqual({ inner: {} });
  });
});

describe('parsePbtxt: strings', () => {
  it.each([
    ['"plain"', 'plain'],
    ["'single'", 'single'],
    ['"it\'s"', "it's"],
    ["'say \"hi\"'", 'say "hi"'],
    ['"a\\nb"', 'a\nb'],
    ['"a\\tb"', 'a\tb'],
    ['"a\\rb"', 'a\rb'],
    ['"back\\\\slash"', 'back\\slash'],
    ['"q\\"q"', 'q"q'],
    ["'q\\'q'", "q'q"],
    ['"\\a\\b\\f\\v\\?"', '\x07\x08\x0c\x0b?'],
    ['"\\101\\102"', 'AB'],
    ['"\\0"', '\0'],
    ['"\\1234"', 'S4'], // octal takes at most three digits
    ['"\\x41\\x4a"', 'AJ'],
    ['"\\x7"', '\x07'],
    ['"\\303\\251"', 'é'], // octal bytes form UTF-8
    ['"\\xc3\\xa9"', 'é'],
    ['"\\u00e9"', 'é'],
    ['"\\U0001F600"', '😀'],
    ['"日本語"', '日本語'],
    ['"con" "cat"', 'concat'],
    ['"a" \'b\'  # comment between\n "c"', 'abc'],
    ['""', ''],
  ])('%s reads as %j', (literal, expected) => {
    expect(parse(`s: ${literal}`)).toEqual({ s: expected });
  });
});

describe('parsePbtxt: numbers, bools and enums', () => {
  it.each([
    ['i32: 42', { i32: 42 }],
    ['i32: -42', { i32: -42 }],
    ['i32: - 42', { i32: -42 }],
    ['i32: -\n  # comment\n 42', { i32: -42 }],
    ['i32: 0x1F', { i32: 31 }],
    ['i32: 010', { i32: 8 }],
    ['i32: 0', { i32: 0 }],
    ['i32: 2147483647', { i32: 2147483647 }],
    ['i32: -2147483648', { i32: -2147483648 }],
    ['u32: 4294967295', { u32: 4294967295 }],
    ['i64: 9007199254740991', { i64: 9007199254740991 }],
    ['i64: -9007199254740991', { i64: -9007199254740991 }],
    ['u64: 1000000000000', { u64: 1000000000000 }],
    ['f: 1.5', { f: 1.5 }],
    ['f: -0.25', { f: -0.25 }],
    ['f: .5', { f: 0.5 }],
    ['f: 5.', { f: 5 }],
    ['f: 1e3', { f: 1000 }],
    ['f: 1.5E-2', { f: 0.015 }],
    ['f: 2.5f', { f: 2.5 }],
    ['f: 3', { f: 3 }],
    ['d: 1e+21', { d: 1e21 }],
    ['f: inf', { f: Number.POSITIVE_INFINITY }],
    ['f: -inf', { f: Number.NEGATIVE_INFINITY }],
    ['f: Infinity', { f: Number.POSITIVE_INFINITY }],
    ['d: -infinity', { d: Number.NEGATIVE_INFINITY }],
    ['f: nan', { f: Number.NaN }],
    ['d: NaN', { d: Number.NaN }],
  ])('%s', (text, expected) => {
    expect(parse(text)).toEqual(expected);
  });

  it('reads 64-bit integers beyond 2^53 as the nearest number', () => {
    expect(parse('i64: 9223372036854775807')).toEqual({ i64: 9223372036854775807 });
    expect(parse('u64: 18446744073709551615')).toEqual({ u64: 18446744073709551615 });
  });

  it.each([
    ['true', true],
    ['True', true],
    ['t', true],
    ['1', true],
    ['false', false],
    ['False', false],
    ['f', false],
    ['0', false],
  ])('bool %s reads as %s', (literal, expected) => {
    expect(parse(`b: ${literal}`)).toEqual({ b: expected });
    expect(parse(`rb: [ ${literal}, ${literal} ]`)).toEqual({ rb: [expected, expected] });
  });

  it('reads enums by name or by number', () => {
    expect(parse('e: TWO')).toEqual({ e: 'TWO' });
    expect(parse('e: 1')).toEqual({ e: 'ONE' });
    expect(parse('re: [ ZERO, 2, ONE ]')).toEqual({ re: ['ZERO', 'TWO', 'ONE'] });
  });
});

describe('parsePbtxt: maps', () => {
  it('reads repeated entries into an object', () => {
    expect(parse('smap { key: "a" value: "1" } smap { key: "b" value: "2" }')).toEqual({
      smap: { a: '1', b: '2' },
    });
  });

  it('reads entries with ":" and <>, in list form, and message values', () => {
    const text = `
      smap: { key: "a", value: "1" }
      smap [ { key: "b" value: "2" }, < key: 'c' value: "3" > ]
      imap { key: 7 value { label: "seven" tags: [ "x" ] } }
      imap: { key: 0x10 value: < weight: 0.5 > }
      emap { key: "k" value: TWO }`;
    expect(parse(text)).toEqual({
      smap: { a: '1', b: '2', c: '3' },
      imap: { '7': { label: 'seven', tags: ['x'] }, '16': { weight: 0.5 } },
      emap: { k: 'TWO' },
    });
  });

  it('lets a later entry with the same key win', () => {
    expect(parse('smap { key: "a" value: "old" } smap { key: "a" value: "new" }')).toEqual({ smap: { a: 'new' } });
  });

  it('fills a missing key or value with the default', () => {
    expect(parse('smap { value: "v" } imap { key: 3 } emap { key: "e" }')).toEqual({
      smap: { '': 'v' },
      imap: { '3': {} },
      emap: { e: 'ZERO' },
    });
  });

  it('reads an empty map list as an empty object', () => {
    expect(parse('smap: [ ]')).toEqual({ smap: {} });
  });
});

describe('parsePbtxt: fields the descriptor does not know', () => {
  it('keeps them with types guessed from the text', () => {
    const v = parse(`
      s: "known"
      word: SOME_ENUM
      yes: true
      n: -12
      x: 0.5
      big: 0x20
      q: "text"
      block { a: 1 nested < b: "c" > }
      many: 1
      many: 2
      list: [ "a", "b" ]
      blocks [ { a: 1 }, { a: 2 } ]`);
    expect(v).toEqual({
      s: 'known',
      word: 'SOME_ENUM',
      yes: true,
      n: -12,
      x: 0.5,
      big: 32,
      q: 'text',
      block: { a: 1, nested: { b: 'c' } },
      many: [1, 2],
      list: ['a', 'b'],
      blocks: [{ a: 1 }, { a: 2 }],
    });
  });

  it('reads text with no descriptor at all', () => {
    expect(parsePbtxt('a: 1 b { c: "d" } a: 2', undefined)).toEqual({ a: [1, 2], b: { c: 'd' } });
  });

  it('keeps unknown fields nested inside known messages', () => {
    expect(parse('inner { label: "l" extra: 3 }')).toEqual({ inner: { label: 'l', extra: 3 } });
  });
});

describe('parsePbtxt: errors name line and column', () => {
  it.each([
    ['s: "abc', 't.pbtxt:1:4: unterminated string'],
    ['s: "abc\n"', 't.pbtxt:1:4: unterminated string'],
    ['\n  s "x"', "t.pbtxt:2:5: expected ':' after field name 's', got string \"x\""],
    ['ri [ 1, 2 ]', "t.pbtxt:1:6: expected ':' after field name 'ri' (before a list of scalars), got '1'"],
    ['inner {\n  label: "x"\n', "t.pbtxt:3:1: expected a field name or '}', got end of input"],
    ['inner { label: "x" >', "t.pbtxt:1:20: unexpected '>', expected '}'"],
    ['s: "a"\n}', "t.pbtxt:2:1: unexpected '}'"],
    ['s: "a"\ns: "b"', "t.pbtxt:2:1: field 's' is not repeated but is set more than once (first at 1:1)"],
    ['inner { } inner { }', "t.pbtxt:1:11: field 'inner' is not repeated but is set more than once (first at 1:1)"],
    ['s: [ "a" ]', "t.pbtxt:1:4: field 's' is not repeated, so it cannot take a list"],
    ['i32: 2147483648', "t.pbtxt:1:6: 2147483648 is out of range for field 'i32' (int32)"],
    ['i32: -2147483649', "t.pbtxt:1:6: -2147483649 is out of range for field 'i32' (int32)"],
    ['u32: -1', "t.pbtxt:1:6: -1 is out of range for field 'u32' (uint32)"],
    ['u64: 18446744073709551616', "t.pbtxt:1:6: 18446744073709551616 is out of range for field 'u64' (uint64)"],
    ['i32: 1.5', "t.pbtxt:1:6: expected an integer for field 'i32' (int32), got '1.5'"],
    ['i64: "5"', "t.pbtxt:1:6: expected an integer for field 'i64' (int64), got string \"5\""],
    ['i32: FIVE', "t.pbtxt:1:6: expected an integer for field 'i32' (int32), got 'FIVE'"],
    ['s: abc', "t.pbtxt:1:4: expected a quoted string for field 's', got 'abc'"],
    ['b: yes', "t.pbtxt:1:4: expected true or false for field 'b', got 'yes'"],
    ['b: 2', "t.pbtxt:1:4: expected true or false for field 'b', got '2'"],
    ['f: "1"', "t.pbtxt:1:4: expected a number for field 'f', got string \"1\""],
    ['e: THREE', "t.pbtxt:1:4: unknown value 'THREE' for enum field 'e' (expected one of ZERO, ONE, TWO)"],
    ['e: 3', "t.pbtxt:1:4: 3 is not a value of enum field 'e'"],
    ['e: "ONE"', "t.pbtxt:1:4: expected an enum name for field 'e', got string \"ONE\""],
    ['s: "\\q"', 't.pbtxt:1:5: invalid escape sequence \\q'],
    ['s: "\\xZZ"', 't.pbtxt:1:5: \\x must be followed by a hex digit'],
    ['s: "\\400"', 't.pbtxt:1:5: octal escape \\400 is above \\377'],
    ['s: "\\u12"', 't.pbtxt:1:5: \\u must be followed by 4 hex digits'],
    ['s: "ok" @', 't.pbtxt:1:9: unexpected character "@"'],
    ['// comment', "t.pbtxt:1:1: '//' comments are not part of the text format; use '#'"],
    ['i32: 12abc', 't.pbtxt:1:6: invalid number "12abc"'],
    ['i32: 1.2.3', 't.pbtxt:1:6: invalid number "1.2.3"'],
    ['inner: "x"', "t.pbtxt:1:8: expected '{' to start message field 'inner', got string \"x\""],
    ['smap: "x"', "t.pbtxt:1:7: expected '{' to start message field 'smap', got string \"x\""],
    ['s { }', "t.pbtxt:1:3: field 's' is a string, not a message"],
    ['ri: [ 1 2 ]', "t.pbtxt:1:9: expected ',' or ']' in the list of 'ri', got '2'"],
    ['ri: [ 1, ]', "t.pbtxt:1:10: expected an integer for field 'ri' (int64), got ']'"],
    ['f: -x', "t.pbtxt:1:5: expected a value for field 'f', got 'x'"],
    ['s: "x" .', "t.pbtxt:1:8: expected a field name, got '.'"],
    ['[ext.field]: 1', 't.pbtxt:1:1: extension and Any fields ([...]) are not supported'],
    ['123: 4', "t.pbtxt:1:1: expected a field name, got '123'"],
    ['s:', "t.pbtxt:1:3: expected a quoted string for field 's', got end of input"],
  ])('%j', (text, message) => {
    const err = thrown(() => parse(text));
    expect(err.code).toBe('INVALID_ARG');
    expect(err.message).toBe(message);
  });

  it("uses '<text>' as the source name by default", () => {
    expect(thrown(() => parsePbtxt('s: ', TEST)).message).toBe(
      "<text>:1:4: expected a quoted string for field 's', got end of input",
    );
  });

  it('counts columns from 1 after tabs and comments', () => {
    expect(thrown(() => parse('# c\n\tinner {\n\t\tlabel: 5 }')).message).toBe(
      "t.pbtxt:3:10: expected a quoted string for field 'label', got '5'",
    );
  });
});

describe('parsePbtxt: positions', () => {
  it('records where each field value starts, by path', () => {
    const positions = new Map<string, PbPosition>();
    parsePbtxt('s: "x"\ninners [\n  { label: "a" },\n  { tags: "t" }\n]\nsmap { key: "k" value: "v" }\n', TEST, {
      positions,
    });
    expect(positions.get('s')).toEqual({ line: 1, column: 1 });
    expect(positions.get('inners')).toEqual({ line: 2, column: 1 });
    expect(positions.get('inners[0]')).toEqual({ line: 3, column: 3 });
    expect(positions.get('inners[0].label')).toEqual({ line: 3, column: 5 });
    expect(positions.get('inners[1].tags[0]')).toEqual({ line: 4, column: 11 });
    expect(positions.get('smap["k"]')).toEqual({ line: 6, column: 6 });
  });
});

describe('formatPbPath', () => {
  it('prints fields, indexes and map keys', () => {
    expect(formatPbPath(['inners', 2, 'tags', 0], TEST)).toBe('inners[2].tags[0]');
    expect(formatPbPath(['smap', 'key with space'], TEST)).toBe('smap["key with space"]');
    expect(formatPbPath(['imap', '7', 'label'], TEST)).toBe('imap["7"].label');
    expect(formatPbPath(['smap', 'plain'], TEST)).toBe('smap["plain"]');
    expect(formatPbPath(['unknown', 'x'], TEST)).toBe('unknown.x');
    expect(formatPbPath([], TEST)).toBe('');
  });
});

describe('formatPbtxt', () => {
  it('writes two-space indented text with lists, maps and escapes', () => {
    const text = formatPbtxt(
      {
        s: 'say "hi"\n\tbye\\ \u0001',
        b: false,
        i64: -5,
        f: 0.1,
        e: 'TWO',
        ri: [-1, 3],
        rs: [],
        inner: { label: 'l', weight: Number.NaN },
        inners: [{ label: 'a' }, { tags: ['x', 'y'] }],
        smap: { k: 'v', 'needs "quotes"': 'w' },
        imap: { '3': { weight: Number.NEGATIVE_INFINITY } },
        extra: { deep: [1, 2], word: 'w' },
      },
      TEST,
    );
    expect(text).toBe(
      [
        's: "say \\"hi\\"\\n\\tbye\\\\ \\001"',
        'b: false',
        'i64: -5',
        'f: 0.1',
        'e: TWO',
        'ri: [ -1, 3 ]',
        'rs: [ ]',
        'inner {',
        '  label: "l"',
        '  weight: nan',
        '}',
        'inners [',
        '  {',
        '    label: "a"',
        '  },',
        '  {',
        '    tags: [ "x", "y" ]',
        '  }',
        ']',
        'smap {',
        '  key: "k"',
        '  value: "v"',
        '}',
        'smap {',
        '  key: "needs \\"quotes\\""',
        '  value: "w"',
        '}',
        'imap {',
        '  key: 3',
        '  value {',
        '    weight: -inf',
        '  }',
        '}',
        'extra {',
        '  deep: [ 1, 2 ]',
        '  word: "w"',
        '}',
        '',
      ].join('\n'),
    );
  });

  it('writes empty messages as { } and skips undefined fields', () => {
    expect(formatPbtxt({ inner: {}, s: undefined, inners: [{}] }, TEST)).toBe('inner { }\ninners [\n  { }\n]\n');
    expect(formatPbtxt({}, TEST)).toBe('');
  });

  it('writes integers exactly, also numeric strings and values beyond 2^53', () => {
    expect(formatPbtxt({ i64: '-9223372036854775808', u64: 2 ** 60, i32: '7' }, TEST)).toBe(
      'i64: -9223372036854775808\nu64: 1152921504606846976\ni32: 7\n',
    );
  });

  it('writes special floats the reader understands', () => {
    const text = formatPbtxt({ inners: [{ weight: Number.POSITIVE_INFINITY }, { weight: -0 }, { weight: 1e-7 }] }, TEST);
    expect(text).toContain('weight: inf\n');
    expect(text).toContain('weight: -0\n');
    expect(text).toContain('weight: 1e-7\n');
    expect(parse(text)).toEqual({ inners: [{ weight: Infinity }, { weight: -0 }, { weight: 1e-7 }] });
  });

  it.each([
    [{ e: 'FOUR' }, 'e: "FOUR" is not one of ZERO, ONE, TWO'],
    [{ s: 5 }, 's: expected a string, got 5'],
    [{ b: 'yes' }, 'b: expected a boolean, got "yes"'],
    [{ i32: 1.5 }, 'i32: expected an integer (int32), got 1.5'],
    [{ i32: 2 ** 31 }, 'i32: 2147483648 is out of range for int32'],
    [{ u32: -1 }, 'u32: -1 is out of range for uint32'],
    [{ ri: [1, 'x'] }, 'ri[1]: expected an integer (int64), got "x"'],
    [{ inner: 'x' }, 'inner: expected an object for message field, got "x"'],
    [{ smap: ['a'] }, 'smap: expected an object for map field, got ["a"]'],
    [{ imap: { abc: {} } }, 'imap["abc"]: expected an integer (uint64), got "abc"'],
    [{ 'bad name': 1 }, 'bad name: field names must be identifiers'],
  ])('rejects %j', (value, message) => {
    const err = thrown(() => formatPbtxt(value, TEST));
    expect(err.code).toBe('INVALID_ARG');
    expect(err.message).toBe(message);
  });

  it('round-trips through the reader', () => {
    const text = `
      s: "α\\\\β\\n" by: "\\001\\x7f" b: t i32: -3 u32: 3 i64: -9007199254740991 u64: 9007199254740991
      f: -1.25e-3 d: 1e300 e: ONE ri: [ 0, -1 ] rb: [ t, f ] re: [ TWO ]
      inner { label: "x" tags: [ "a", "b" ] }
      inners [ { weight: 2 }, { } ]
      smap { key: "k" value: "v" } imap { key: 2 value { } } emap { key: "e" value: TWO }
      unknown_list: [ 1.5, "s", true ] unknown_msg { a: [ { b: 1 } ] }`;
    const first = parse(text);
    const second = parse(formatPbtxt(first, TEST));
    expect(second).toEqual(first);
    expect(first['by']).toBe('\u0001\u007f');
  });
});

describe('quotePbtxtString', () => {
  it('escapes quotes, backslashes and control characters, keeps other text', () => {
    expect(quotePbtxtString('a"b\\c\r\n\t\u0000\u007fé😀\'')).toBe('"a\\"b\\\\c\\r\\n\\t\\000\\177é😀\'"');
  });
});
