#!/usr/bin/env python3
"""validate_json.py SCHEMA DEFINITION: validates the JSON on stdin against
one definition ($defs/DEFINITION) of SCHEMA, with python3-jsonschema; prints
every error (its path in the document and what is wrong) and exits 1 when
there is one."""
import json
import sys

import jsonschema

schema_path, definition = sys.argv[1], sys.argv[2]
with open(schema_path, encoding="utf-8") as schema_file:
    schema = json.load(schema_file)
if definition not in schema["$defs"]:
    sys.exit(f"validate_json.py: {schema_path} has no definition {definition}")
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{definition}"})
document = json.load(sys.stdin)
errors = sorted(validator.iter_errors(document), key=lambda error: list(error.absolute_path))
for error in errors:
    where = "/".join(str(part) for part in error.absolute_path) or "(the document)"
    print(f"{where}: {error.message[:300]}", file=sys.stderr)
sys.exit(1 if errors else 0)
