// query.mjs runs SQL with DuckDB (@duckdb/node-api, installed by
// `make duckdb` into .cache/duckdb) and prints the result of the last
// statement as one JSON object on stdout:
//
//   {"columns": [{"name": "a", "type": "BIGINT"}, ...], "rows": [[...], ...]}
//
// Usage: node query.mjs MODULE_DIR < statements.sql
//
// MODULE_DIR is the folder whose node_modules holds @duckdb/node-api. The
// statements are read from stdin, separated by semicolons; all run in one
// in-memory database, so earlier ones may create tables or COPY to Parquet.
//
// Values are written without loss: BIGINT, UBIGINT and HUGEINT as exact
// JSON number literals (never through a double); FLOAT and DOUBLE as the
// shortest literal that parses back to the same double (a FLOAT is widened
// exactly), with -0 kept as the literal -0 and NaN, +Inf, -Inf as the
// strings "NaN", "+Inf", "-Inf"; LIST and ARRAY as JSON arrays; STRUCT as an
// object; MAP as an array of {"key": k, "value": v} in stored order; BLOB as
// standard base64; every other type (DECIMAL, DATE, TIMESTAMP, ...) as
// DuckDB's text for it. NULL is null.
//
// Exit status: 0 on success; 1 for an SQL error (DuckDB's message on
// stderr); 3 when @duckdb/node-api cannot be loaded from MODULE_DIR.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const moduleDir = process.argv[2];
if (!moduleDir) {
	process.stderr.write('usage: node query.mjs MODULE_DIR < statements.sql\n');
	process.exit(2);
}

let duckdb;
try {
	const require = createRequire(path.join(path.resolve(moduleDir), 'package.json'));
	duckdb = require('@duckdb/node-api');
} catch (e) {
	process.stderr.write(`@duckdb/node-api is not installed under ${moduleDir} (make duckdb): ${e.message}\n`);
	process.exit(3);
}

// enc returns the JSON text of one DuckDB value.
function enc(v) {
	if (v === null || v === undefined) {
		return 'null';
	}
	switch (typeof v) {
		case 'bigint':
			return v.toString();
		case 'number':
			if (Number.isNaN(v)) {
				return '"NaN"';
			}
			if (v === Infinity) {
				return '"+Inf"';
			}
			if (v === -Infinity) {
				return '"-Inf"';
			}
			if (Object.is(v, -0)) {
				return '-0';
			}
			return JSON.stringify(v);
		case 'string':
		case 'boolean':
			return JSON.stringify(v);
	}
	if (v instanceof duckdb.DuckDBListValue || v instanceof duckdb.DuckDBArrayValue) {
		return '[' + v.items.map(enc).join(',') + ']';
	}
	if (v instanceof duckdb.DuckDBStructValue) {
		return '{' + Object.keys(v.entries).map((k) => JSON.stringify(k) + ':' + enc(v.entries[k])).join(',') + '}';
	}
	if (v instanceof duckdb.DuckDBMapValue) {
		return '[' + v.entries.map(({ key, value }) => '{"key":' + enc(key) + ',"value":' + enc(value) + '}').join(',') + ']';
	}
	if (v instanceof duckdb.DuckDBBlobValue) {
		return JSON.stringify(Buffer.from(v.bytes).toString('base64'));
	}
	return JSON.stringify(v.toString());
}

const sql = readFileSync(0, 'utf8');
let reader;
try {
	const instance = await duckdb.DuckDBInstance.create(':memory:');
	const conn = await instance.connect();
	reader = await conn.runAndReadAll(sql);
} catch (e) {
	process.stderr.write(`duckdb: ${e.message}\n`);
	process.exit(1);
}
const names = reader.columnNames();
const types = reader.columnTypes().map((t) => t.toString());
const out = [];
out.push('{"columns":[');
out.push(names.map((n, i) => '{"name":' + JSON.stringify(n) + ',"type":' + JSON.stringify(types[i]) + '}').join(','));
out.push('],"rows":[');
out.push(reader.getRows().map((row) => '[' + row.map(enc).join(',') + ']').join(',\n'));
out.push(']}\n');
process.stdout.write(out.join(''));
