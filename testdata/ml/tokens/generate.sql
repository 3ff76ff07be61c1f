-- testdata/ml/tokens/docs.parquet: 400 synthetic token documents for the
-- packed-rows example (examples/packed_lm.py). Regenerate with
--   node test/duckdb/query.mjs .cache/duckdb < testdata/ml/tokens/generate.sql
-- Document i has 1 + (i * 7919) % 97 tokens (every 23rd row is empty);
-- token k is (3 * i + 5 * k) % 64: a vocabulary of 64 ids, 0 reserved for
-- padding and 1 for end of document by the example's packing flags, so
-- the ids 0 and 1 the generator produces double as ordinary tokens.
CREATE TABLE t AS SELECT i AS id,
  CASE WHEN i % 23 = 7 THEN []::INT[]
       ELSE list_transform(range(1 + (i * 7919) % 97), k -> ((3 * i + 5 * k) % 64)::INT) END AS tokens
FROM range(400) r(i);
COPY (SELECT * FROM t ORDER BY id) TO 'testdata/ml/tokens/docs.parquet' (FORMAT parquet, ROW_GROUP_SIZE 100);
SELECT count(*), sum(len(tokens)) FROM t
;
-- testdata/ml/tokens/code.parquet: 120 more documents, a second source for
-- the packed-mixture example (examples/packed_lm.py --demo --mixture).
-- Document i has 8 + (i * 104729) % 61 tokens; token k is (7 * i + 11 * k) % 64.
CREATE TABLE c AS SELECT i AS id,
  list_transform(range(8 + (i * 104729) % 61), k -> ((7 * i + 11 * k) % 64)::INT) AS tokens
FROM range(120) r(i);
COPY (SELECT * FROM c ORDER BY id) TO 'testdata/ml/tokens/code.parquet' (FORMAT parquet, ROW_GROUP_SIZE 50);
SELECT count(*), sum(len(tokens)) FROM c
