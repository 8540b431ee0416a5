"""Diagnostic codes of the rules-file loader, in one place (README and `validate` output use them).

``E_*`` codes are errors (the file is refused, `validate` exits 2); ``W_*`` codes are warnings.
"""
from __future__ import annotations

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
E_CFG_UNTRUSTED = "E_CFG_UNTRUSTED"  # also raised in assertions.expected.common.load_policy_file
E_ASSERT_INEFFECTIVE = "E_ASSERT_INEFFECTIVE"
E_ASSERT_BUILD = "E_ASSERT_BUILD"
E_INTERNAL = "E_INTERNAL"
E_UNIT_FORM_FAILED = "E_UNIT_FORM_FAILED"  # raised by config.model.require_runnable, not by the loader
W_CFG_VACUOUS_EXPECTED = "W_CFG_VACUOUS_EXPECTED"
W_CFG_EVIDENCE_KEY_UNSET = "W_CFG_EVIDENCE_KEY_UNSET"
W_CFG_REGEX_BACKTRACKING = "W_CFG_REGEX_BACKTRACKING"  # raised by BuildContext.compile_regex (assertions.regex_risk)
W_CFG_TOOL_NAME = "W_CFG_TOOL_NAME"  # raised in assertions.selectors.warn_tool_name
W_CFG_BLOCK_NEVER = "W_CFG_BLOCK_NEVER"  # `action: block` on a test none of whose checks can fail at a call's start
