// The memory field of the new-session form: what people type, in MiB for the API.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseMemory, fmtMib } from '../src/components/memory.js';

test('bare numbers are MiB, Gi/G are GiB, Mi/M are MiB', () => {
  assert.equal(parseMemory('512'), 512);
  assert.equal(parseMemory('512Mi'), 512);
  assert.equal(parseMemory('16Gi'), 16384);
  assert.equal(parseMemory(' 1.5 g '), 1536);
  assert.equal(parseMemory('2GiB'), 2048);
});

test('anything else is sent as typed, for the server to name the field', () => {
  assert.equal(parseMemory('lots'), 'lots');
  assert.equal(parseMemory('16 TB'), '16 TB');
  assert.equal(parseMemory('-1'), '-1');
});

test('sizes read back in the larger unit when whole', () => {
  assert.equal(fmtMib(16384), '16 Gi');
  assert.equal(fmtMib(1536), '1536 Mi');
});
