"""Diagnostic codes of the rules-file loader, in one place (README and `validate` output use them).

``E_*`` codes are errors (the file is refused, `validate` exits 2); ``W_*`` codes are warnings.
"""
from __future__ import annotations

from typing import Dict

E_PATH_NOT_FOUND = "E_PATH_NOT_FOUND"
E_PATH_UNREADABLE = "E_PATH_UNREADABLE"
E_CFG_TOO_LARGE = "E_CFG_TOO_LARGE"
E_CFG_ENCODING = "E_CFG_ENCODING"
E_CFG_PARSE = "E_CFG_PARSE"
E_CFG_ALIAS = "E_CFG_ALIAS"
E_CFG_TOO_DEEP = "E_CFG_TOO_DEEP"
E_CFG_EMPTY = "E_CFG_EMPTY"
E_CFG_DUPLICATE_KEY = "E_CFG_DUPLICATE_KEY"
E_CFG_UNKNOWN_KEY = "E_CFG_UNKNOWN_KEY"
E_CFG_REQUIRED = "E_CFG_REQUIRED"
E_CFG_TYPE = "E_CFG_TYPE"
E_CFG_VALUE = "E_CFG_VALUE"
E_CFG_VERSION = "E_CFG_VERSION"
E_CFG_LEGACY_POLICIES = "E_CFG_LEGACY_POLICIES"
E_CFG_LEGACY_REF = "E_CFG_LEGACY_REF"
E_CFG_DUPLICATE_ID = "E_CFG_DUPLICATE_ID"
E_CFG_UNKNOWN_TYPE = "E_CFG_UNKNOWN_TYPE"
E_CFG_EXPECTED = "E_CFG_EXPECTED"
E_CFG_EXPECTED_MULTIPLE = "E_CFG_EXPECTED_MULTIPLE"
E_CFG_EMBEDDER = "E_CFG_EMBEDDER"
E_CFG_SCHEMA_REF = "E_CFG_SCHEMA_REF"  # raised in assertions.base.BuildContext.compile_schema
E_CFG_UNTRUSTED = "E_CFG_UNTRUSTED"  # also raised in assertions.expected.load_policy_file
E_ASSERT_INEFFECTIVE = "E_ASSERT_INEFFECTIVE"
E_ASSERT_BUILD = "E_ASSERT_BUILD"
E_INTERNAL = "E_INTERNAL"
E_UNIT_FORM_FAILED = "E_UNIT_FORM_FAILED"  # raised by config.model.require_runnable, not by the loader
W_CFG_VACUOUS_EXPECTED = "W_CFG_VACUOUS_EXPECTED"
W_CFG_EVIDENCE_KEY_UNSET = "W_CFG_EVIDENCE_KEY_UNSET"
W_CFG_REGEX_BACKTRACKING = "W_CFG_REGEX_BACKTRACKING"  # raised in assertions.base.BuildContext.compile_regex
W_CFG_TOOL_NAME = "W_CFG_TOOL_NAME"  # raised in assertions.selectors.warn_tool_name

DESCRIPTIONS: Dict[str, str] = {
    E_PATH_NOT_FOUND: "the rules file does not exist (or is not a file)",
    E_PATH_UNREADABLE: "the rules file exists but cannot be read",
    E_CFG_TOO_LARGE: "the rules file is larger than 1 MiB",
    E_CFG_ENCODING: "the rules file is not valid UTF-8",
    E_CFG_PARSE: "YAML syntax error",
    E_CFG_ALIAS: "too many YAML aliases or alias expansions (alias bomb)",
    E_CFG_TOO_DEEP: "nesting deeper than 64 levels",
    E_CFG_EMPTY: "the rules file holds no document",
    E_CFG_DUPLICATE_KEY: "a mapping repeats a key",
    E_CFG_UNKNOWN_KEY: "a key that is not part of the format",
    E_CFG_REQUIRED: "a required key is missing",
    E_CFG_TYPE: "a value has the wrong type",
    E_CFG_VALUE: "a value is outside what the key accepts",
    E_CFG_VERSION: "`version` is missing or not 1",
    E_CFG_LEGACY_POLICIES: "Assay v0 top-level `policies:`",
    E_CFG_LEGACY_REF: "Assay legacy `expected: {$ref: ...}`",
    E_CFG_DUPLICATE_ID: "two tests share an id",
    E_CFG_UNKNOWN_TYPE: "an assertion or expected `type` that does not exist",
    E_CFG_EXPECTED: "an `expected:` block that is not one check",
    E_CFG_EXPECTED_MULTIPLE: "an `expected:` list with two or more entries",
    E_CFG_EMBEDDER: "`settings.embedder` cannot be imported or called",
    E_CFG_SCHEMA_REF: "a schema `$ref` that does not resolve within its own schema (nothing is fetched)",
    E_CFG_UNTRUSTED: "an untrusted rules file names code to import or a file outside its folder",
    E_ASSERT_INEFFECTIVE: "an assertion that cannot fail",
    E_ASSERT_BUILD: "an assertion type raised while being built or evaluated",
    E_INTERNAL: "a bug in spanassert; please report it",
    E_UNIT_FORM_FAILED: "a unit-test form contradicts its `expect`: every door but `validate` refuses the file",
    W_CFG_VACUOUS_EXPECTED: "a test with no checks",
    W_CFG_EVIDENCE_KEY_UNSET: "`settings.evidence_key_env` names an unset environment variable",
    W_CFG_REGEX_BACKTRACKING: "a regex with nested or overlapping quantifiers (exponential backtracking)",
    W_CFG_TOOL_NAME: "an exact tool name with regex/glob characters or whitespace: it can never match a call",
}
