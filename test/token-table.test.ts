import { describe, expect, it } from 'vitest';

import { TokenTable } from '../lib/token-table.js';

describe('TokenTable', () => {
  it('keeps a value per token until it is deleted', () => {
    const table = new TokenTable<string>(8);
    expect(table.get(1)).toBeUndefined();
    expect(table.has(1)).toBe(false);
    table.set(1, 'a');
    table.set(2, 'b');
    expect([table.get(1), table.get(2), table.size]).toEqual(['a', 'b', 2]);
    table.set(1, 'c');
    expect([table.get(1), table.size]).toEqual(['c', 2]);
    expect(table.delete(1)).toBe(true);
    expect(table.delete(1)).toBe(false);
    expect([table.get(1), table.has(1), table.has(2), table.size]).toEqual([undefined, false, true, 1]);
  });

  it('keeps tokens whose slot an older token still holds, and gives the slot to the next one after', () => {
    const table = new TokenTable<string>(8);
    table.set(3, 'old'); // a long request: slot 3
    for (let token = 4; token <= 40; token++) {
      table.set(token, `t${token}`);
      if (token !== 11 && token !== 19) table.delete(token);
    }
    // 11 and 19 share slot 3 with the older token 3, still in flight.
    expect([table.get(3), table.get(11), table.get(19), table.size]).toEqual(['old', 't11', 't19', 3]);
    expect(table.get(27)).toBeUndefined();
    expect(table.delete(11)).toBe(true);
    expect([table.has(11), table.get(19), table.size]).toEqual([false, 't19', 2]);
    table.delete(3);
    table.set(43, 'new'); // slot 3 again
    expect([table.get(43), table.get(19), table.get(3), table.size]).toEqual(['new', 't19', undefined, 2]);
    table.set(19, 'u19');
    expect([table.get(19), table.size]).toEqual(['u19', 2]);
  });

  it('handles tokens past 2^32 like any other', () => {
    const table = new TokenTable<number>(16);
    const big = 2 ** 40 + 5;
    table.set(big, 1);
    table.set(5, 2); // same slot, a different token
    expect([table.get(big), table.get(5), table.get(big + 16), table.size]).toEqual([1, 2, undefined, 2]);
    expect(table.delete(big)).toBe(true);
    expect([table.get(big), table.get(5)]).toEqual([undefined, 2]);
  });

  it('holds nothing of a deleted value', async () => {
    const table = new TokenTable<object>(8);
    const refs: WeakRef<object>[] = [];
    // In a function of its own: no local of this one still holds the last value.
    const churn = (): void => {
      for (let token = 1; token <= 100; token++) {
        const value = { token, payload: new Array(64).fill(token) };
        refs.push(new WeakRef(value));
        table.set(token, value);
        table.delete(token);
      }
    };
    churn();
    // WeakRef targets are kept until the current job ends.
    await new Promise((resolve) => setImmediate(resolve));
    globalThis.gc!();
    expect(refs.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
    expect(table.size).toBe(0);
  });
});
