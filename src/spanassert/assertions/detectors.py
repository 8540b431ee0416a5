"""Deterministic detectors for secrets and personal data in recorded text.

Each detector is a shape (a regex with bounded repetition, so a scan is linear in the text) and,
where the shape alone would flag look-alikes, a check: the Luhn sum and an issuer prefix for card
numbers, the ISO 7064 mod-97 checksum and the country's length for IBANs, a decodable JSON header
for JWTs, a random-looking body (letters and digits) for API keys and bearer tokens, a valid area
and exchange code for North American numbers. Detectors report *that* and *where* something was
found, never the text found. Used by ``trace_no_sensitive_data`` and by ``args_match``
(``{argument: {detector: NAME}}``).

Names: ``cloud_access_key`` (AWS access key ids and secret-key assignments, Google ``AIza`` keys,
Azure storage account keys), ``private_key`` (PEM/OpenSSH/PGP private key headers), ``jwt``,
``bearer_token``, ``model_api_key`` (OpenAI ``sk-``/``sk-proj-``, Anthropic ``sk-ant-``, Groq
``gsk_``, Hugging Face ``hf_``, Replicate ``r8_``, xAI ``xai-``, Perplexity ``pplx-``),
``credit_card``, ``iban``, ``email``, ``phone``. Groups: ``secrets``, ``pii``, ``all``.
"""
from __future__ import annotations

import base64
import json
import re
import unicodedata
from typing import Callable, Dict, Final, Iterable, List, Optional, Pattern, Set, Tuple


class Cue:
    """What every text a detector finds something in holds, as tests much cheaper than a regex
    search: one of ``words``; one of ``lower_words`` in the text lowercased (for a case-insensitive
    shape); at least ``digits`` digits. A text with none of them is cleared for that detector. Each
    is a necessary condition of the detector's patterns, read off them (tests/test_detectors.py
    holds them to every positive of the corpus and to texts built around each pattern's parts)."""

    __slots__ = ("words", "lower_words", "digits")

    def __init__(self, words: Tuple[str, ...] = (), lower_words: Tuple[str, ...] = (), digits: int = 0) -> None:
        self.words = words
        self.lower_words = lower_words
        self.digits = digits


class Detector:
    """``hint``: a regex that every text this detector finds something in matches too (a literal
    every match holds, mostly); ``cue``: the same kind of condition as cheap tests (see
    :class:`Scanner`). ``tests/test_detectors.py`` checks both against every positive of the corpus."""

    __slots__ = ("name", "doc", "patterns", "check", "hint", "cue")

    def __init__(self, name: str, doc: str, patterns: Iterable[str],
                 check: Optional[Callable[[re.Match[str]], bool]] = None, flags: int = 0,
                 hint: Optional[str] = None, cue: Optional[Cue] = None) -> None:
        self.name = name
        self.doc = doc
        self.patterns: Tuple[Pattern[str], ...] = tuple(re.compile(p, flags) for p in patterns)
        self.check = check
        self.hint = hint
        self.cue = cue

    def found(self, text: str) -> bool:
        for rx in self.patterns:
            for m in rx.finditer(text):
                if self.check is None or self.check(m):
                    return True
        return False


def _random_body(body: str, *, upper: bool = False) -> bool:
    has_digit = any(c.isdigit() for c in body)
    has_alpha = any(c.isalpha() for c in body)
    if not (has_digit and has_alpha):
        return False
    if upper and not (any(c.isupper() for c in body) and any(c.islower() for c in body)):
        return False
    return len(set(body)) >= 8


# -- secrets ----------------------------------------------------------------------------------------
_AWS_ID: Final = r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA|AIPA|ANPA|ANVA|AGPA)[A-Z0-9]{16}(?![A-Za-z0-9])"
_AWS_SECRET: Final = r"(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
_GOOGLE: Final = r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"
_AZURE: Final = r"AccountKey=([A-Za-z0-9+/]{86}==)"


def _cloud_check(m: re.Match[str]) -> bool:
    body = m.group(1) if m.re.groups else m.group(0)[4:]
    return _random_body(body)


_PRIVATE_KEY: Final = r"-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----"

_JWT: Final = (r"(?<![A-Za-z0-9_-])(eyJ[A-Za-z0-9_-]{5,4096})\.(eyJ[A-Za-z0-9_-]{5,16384})\.([A-Za-z0-9_-]{10,4096})"
        r"(?![A-Za-z0-9_-])")


def _b64json(part: str) -> Optional[object]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value: object = json.loads(raw.decode("utf-8"))
        return value
    except (ValueError, UnicodeDecodeError):
        return None


def _jwt_check(m: re.Match[str]) -> bool:
    header = _b64json(m.group(1))
    return isinstance(header, dict) and "alg" in header and isinstance(_b64json(m.group(2)), dict)


_BEARER: Final = r"(?<![A-Za-z0-9])[Bb]earer\s{1,4}([A-Za-z0-9._~+/-]{20,4096}=*)"


def _bearer_check(m: re.Match[str]) -> bool:
    return _random_body(m.group(1))


_MODEL_KEYS: Final = (
    r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-)?([A-Za-z0-9_-]{32,512})(?![A-Za-z0-9_-])",  # OpenAI
    r"(?<![A-Za-z0-9_-])sk-ant-[a-z]{2,8}\d{2}-([A-Za-z0-9_-]{40,512})(?![A-Za-z0-9_-])",  # Anthropic
    r"(?<![A-Za-z0-9_])gsk_([A-Za-z0-9]{40,64})(?![A-Za-z0-9])",  # Groq
    r"(?<![A-Za-z0-9_])hf_([A-Za-z0-9]{30,40})(?![A-Za-z0-9])",  # Hugging Face
    r"(?<![A-Za-z0-9_])r8_([A-Za-z0-9]{30,40})(?![A-Za-z0-9])",  # Replicate
    r"(?<![A-Za-z0-9_-])xai-([A-Za-z0-9]{60,100})(?![A-Za-z0-9])",  # xAI
    r"(?<![A-Za-z0-9_-])pplx-([A-Za-z0-9]{40,60})(?![A-Za-z0-9])",  # Perplexity
)


def _model_key_check(m: re.Match[str]) -> bool:
    return _random_body(m.group(1), upper=True)


# -- personal data ----------------------------------------------------------------------------------
_CARD: Final = r"(?<![\d.,-])(\d(?:[ -]?\d){11,18})(?!\d|[.,-]\d)"


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_brand_ok(d: str) -> bool:
    n = len(d)
    if d[0] == "4":
        return n in (13, 16, 19)  # Visa
    p2, p3, p4 = int(d[:2]), int(d[:3]), int(d[:4])
    if 51 <= p2 <= 55 or 2221 <= p4 <= 2720:
        return n == 16  # Mastercard
    if p2 in (34, 37):
        return n == 15  # American Express
    if p4 == 6011 or 644 <= p3 <= 649 or p2 == 65:
        return 16 <= n <= 19  # Discover
    if 3528 <= p4 <= 3589:
        return 16 <= n <= 19  # JCB
    if 300 <= p3 <= 305 or p2 in (36, 38):
        return 14 <= n <= 19  # Diners Club
    if p2 == 62:
        return 16 <= n <= 19  # UnionPay
    return False


def _card_check(m: re.Match[str]) -> bool:
    text = m.group(1)
    seps = {c for c in text if not c.isdigit()}
    if len(seps) > 1:
        return False  # mixed separators: not how a card number is written
    if not seps:
        return 13 <= len(text) <= 19 and _card_brand_ok(text) and luhn_ok(text)
    groups = re.split(r"[ -]", text)
    # Written in groups (4-4-4-4, 4-6-5, ...): the number may be followed by other digits, so every
    # run of whole groups from the first one is a candidate.
    for k in range(len(groups), 2, -1):
        head = groups[:k]
        if any(len(g) < 4 for g in head[:-1]) or len(head) > 5:
            continue
        digits = "".join(head)
        if 13 <= len(digits) <= 19 and _card_brand_ok(digits) and luhn_ok(digits):
            return True
    return False


# ISO 13616 registry: country -> IBAN length.
IBAN_LENGTHS: Final[Dict[str, int]] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
    "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25,
    "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}
_IBAN: Final = r"(?<![A-Za-z0-9])([A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30})"


def iban_ok(compact: str) -> bool:
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def _iban_check(m: re.Match[str]) -> bool:
    text = m.group(1)
    want = IBAN_LENGTHS.get(text[:2])
    if want is None:
        return False
    compact = ""
    for i, c in enumerate(text):
        if c == " ":
            continue
        compact += c
        if len(compact) == want:
            rest = text[i + 1:]
            if rest and rest[0] != " ":
                return False  # the run goes on: part of a longer token
            return iban_ok(compact)
    return False


_EMAIL_LOCAL: Final = re.compile(r"[A-Za-z0-9._%+-]{1,64}$")
_EMAIL_DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])")


class _EmailDetector(Detector):
    """Found around each ``@`` (a regex starting at every local-part character would be quadratic)."""

    def found(self, text: str) -> bool:
        at = text.find("@")
        while at != -1:
            local = _EMAIL_LOCAL.search(text, max(0, at - 64), at)
            if local is not None and not local.group(0).startswith(".") and not local.group(0).endswith(".") \
                    and _EMAIL_DOMAIN.match(text, at + 1) is not None:
                return True
            at = text.find("@", at + 1)
        return False


_PHONE_INTL: Final = r"(?<![\w+])\+([1-9][\d ().-]{6,22}\d)(?!\d)"
_PHONE_NANP: Final = (
    r"(?<![\w.-])([2-9]\d{2})([-. ])[2-9]\d{2}\2\d{4}(?![\d-]|\.\d)",  # 415-555-0132, 415.555.0132
    r"(?<![\w.-])\([2-9]\d{2}\) ?[2-9]\d{2}[-. ]\d{4}(?![\d-]|\.\d)",  # (415) 555-0132
)


def _phone_check(m: re.Match[str]) -> bool:
    if m.re.pattern != _PHONE_INTL:
        return True
    body = m.group(1)
    if re.search(r"[ .-]{2}|[(][^\d]|[^\d][)]", body.replace(") ", ")")):
        return False  # doubled separators, empty parentheses: not how a number is written
    digits = "".join(c for c in body if c.isdigit())
    return 8 <= len(digits) <= 15


DETECTORS: Final[Dict[str, Detector]] = {
    d.name: d
    for d in (
        Detector("cloud_access_key", "AWS access key ids and secret-key assignments, Google `AIza` API keys, "
                 "Azure storage `AccountKey=`", (_AWS_ID, _AWS_SECRET, _GOOGLE, _AZURE), _cloud_check,
                 hint=r"A(?:KIA|SIA|BIA|CCA|IDA|ROA|IPA|NPA|NVA|GPA|Iza|ccountKey=)|(?i:secret)",
                 cue=Cue(("AKIA", "ASIA", "ABIA", "ACCA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "AGPA", "AIza",
                          "AccountKey="), lower_words=("cret",))),
        Detector("private_key", "PEM, OpenSSH and PGP private key blocks", (_PRIVATE_KEY,), hint="PRIVATE KEY",
                 cue=Cue(("PRIVATE KEY",))),
        Detector("jwt", "JSON Web Tokens (three base64url parts, a JSON header with `alg`)", (_JWT,), _jwt_check,
                 hint="eyJ", cue=Cue(("eyJ",))),
        Detector("bearer_token", "`Bearer <token>` credentials (a random-looking token of 20+ characters)",
                 (_BEARER,), _bearer_check, hint="[Bb]earer", cue=Cue(("earer",))),
        Detector("model_api_key", "API keys of model providers: OpenAI, Anthropic, Groq, Hugging Face, Replicate, "
                 "xAI, Perplexity", _MODEL_KEYS, _model_key_check,
                 hint="sk-|gsk_|hf_|r8_|xai-|pplx-", cue=Cue(("sk-", "gsk_", "hf_", "r8_", "xai-", "pplx-"))),
        Detector("credit_card", "payment card numbers: an issuer prefix, a valid length and the Luhn check",
                 (_CARD,), _card_check, hint=r"\d(?:[ -]?\d){11}", cue=Cue(digits=12)),
        Detector("iban", "IBANs: a registered country, its length, and the mod-97 checksum", (_IBAN,), _iban_check,
                 hint=r"[A-Z]{2}\d{2}", cue=Cue(digits=2)),
        _EmailDetector("email", "e-mail addresses (`local@domain.tld`)", (), hint="@", cue=Cue(("@",))),
        Detector("phone", "phone numbers: international (`+` and 8-15 digits) or North American "
                 "(`(415) 555-0132`, `415-555-0132`)", (_PHONE_INTL, *_PHONE_NANP), _phone_check,
                 hint=r"\+[1-9]|\d{3}", cue=Cue(("+",), digits=10)),
    )
}

GROUPS: Final[Dict[str, Tuple[str, ...]]] = {
    "secrets": ("cloud_access_key", "private_key", "jwt", "bearer_token", "model_api_key"),
    "pii": ("credit_card", "iban", "email", "phone"),
    "all": tuple(DETECTORS),
}
DETECTOR_NAMES: Final[Tuple[str, ...]] = tuple(DETECTORS) + tuple(GROUPS)


def expand(names: Iterable[str]) -> List[str]:
    """Detector names with groups expanded, in declaration order, without duplicates."""
    wanted: Set[str] = set()
    for n in names:
        wanted.update(GROUPS.get(n, (n,)))
    return [n for n in DETECTORS if n in wanted]


_NOT_DIGITS_TABLE: Final = bytes(range(256))
_DIGIT_BYTES: Final = b"0123456789"
_translate: Final = bytes.translate  # called as a function: a compiled build skips the method lookup


def _digit_count(text: str) -> int:
    """How many digits ``text`` holds (any Unicode digit: regexes' ``\\d``); for ASCII text by one
    C-level pass, otherwise a bound no cue exceeds (every cue then holds)."""
    if not text.isascii():
        return len(text)  # \d matches digits of every script: a bound on how many there are
    raw = text.encode("ascii")
    return len(raw) - len(_translate(raw, _NOT_DIGITS_TABLE, _DIGIT_BYTES))


# Invisible characters, removed by :func:`visible`: Unicode's format characters (category Cf, as of
# Unicode 14: soft hyphen, zero-width space and joiners, word joiner, bidi controls, byte order mark,
# tags...), the combining grapheme joiner and the variation selectors. Ranges, inclusive.
_INVISIBLE_RANGES: Final = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064),
    (0x2066, 0x206F), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
    (0xE0100, 0xE01EF),
)
_INVISIBLE: Final[Dict[int, None]] = {c: None for lo, hi in _INVISIBLE_RANGES for c in range(lo, hi + 1)}


def visible(text: str) -> str:
    """``text`` as a reader sees it: NFKC-normalised (full-width digits and letters, ligatures and
    other compatibility forms become their plain forms: U+FF14 is ``4``, U+FF20 is ``@``) and without
    invisible format characters (a zero-width space splitting a key or a card number). ASCII text
    is returned as it is (nothing to do: one C-level test)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def _gate(word: str) -> str:
    """The character of ``word`` least likely in a recorded value, for :class:`Scanner`: its first
    punctuation (not a space), else its first capital; "" when it has neither."""
    for c in word:
        if not c.isalnum() and not c.isspace():
            return c
    for c in word:
        if c.isupper():
            return c
    return ""


class Scanner:
    """The detectors ``names``, with a cheap test that clears the text most recorded values are.

    Trying each detector's patterns on a text costs a regex call per pattern (about 15 for
    ``all``), each with look-arounds at every position; even one search for the alternation of
    their hints costs microseconds on a short text, Python's regex engine trying every branch at
    every position. Every detector has a :class:`Cue`, conditions any text it finds something in
    meets, tested with substring searches and one digit count. Where no cue holds, no detector can
    find anything, and the text is cleared. Where one holds, every detector runs in order as
    before: the result is the same."""

    __slots__ = ("names", "always", "words", "gated", "lower_words", "digits", "clears_containing_text")

    def __init__(self, names: Iterable[str]) -> None:
        self.names: Tuple[str, ...] = tuple(names)
        cues = [DETECTORS[n].cue for n in self.names]
        self.always = frozenset(n for n, c in zip(self.names, cues) if c is None)
        words: List[str] = []
        lower: List[str] = []
        digits = 0
        for c in cues:
            if c is None:
                continue
            words.extend(w for w in c.words if w not in words)
            lower.extend(w for w in c.lower_words if w not in lower)
            if c.digits and (not digits or c.digits < digits):
                digits = c.digits
        # A word is in a text only if each of its characters is, and finding one character costs a
        # quarter of finding a word: a word with a character rarely seen in recorded values
        # (punctuation, then capitals: the `_` of `gsk_` and `hf_`, the `A` of cloud key prefixes,
        # the `J` of `eyJ`) is tested only when the text holds that character, words that share
        # it together; the others (and one-character words) each on their own.
        groups: Dict[str, List[str]] = {}
        for w in words:
            groups.setdefault(_gate(w) if len(w) > 1 else "", []).append(w)
        self.gated: Tuple[Tuple[str, Tuple[str, ...]], ...] = tuple((g, tuple(ws)) for g, ws in groups.items() if g)
        self.words: Tuple[str, ...] = tuple(groups.get("", ()))
        self.lower_words: Tuple[str, ...] = tuple(lower)
        self.digits = digits
        # A cue is met by a text whenever it is met by a piece of that text (substrings, digit
        # counts): a text no cue holds for clears every piece of it too.
        self.clears_containing_text = not self.always

    def may_find(self, text: str) -> bool:
        """False when no detector of this scanner can find anything in ``text``."""
        for gate, group in self.gated:
            if gate in text:
                for w in group:
                    if w in text:
                        return True
        for w in self.words:
            if w in text:
                return True
        if self.lower_words:
            low = text.lower()
            for w in self.lower_words:
                if w in low:
                    return True
        return bool(self.digits) and _digit_count(text) >= self.digits

    def clears(self, text: str) -> bool:
        """True when no detector can find anything in ``text`` or in any piece of it (see
        ``clears_containing_text``), nor in what :func:`visible` makes of them; False when that is
        not known."""
        if not self.clears_containing_text or self.may_find(text):
            return False
        return text.isascii() or not self.may_find(visible(text))

    def scan(self, text: str) -> Optional[str]:
        """The name of the first detector that finds something in ``text``, or in what
        :func:`visible` makes of it (a secret split by a zero-width space, a card number in
        full-width digits), or None."""
        found = self._scan(text)
        if found is None and not text.isascii():
            seen = visible(text)
            if seen != text:
                return self._scan(seen)
        return found

    def _scan(self, text: str) -> Optional[str]:
        if not self.may_find(text):
            if not self.always:
                return None
            for n in self.names:
                if n in self.always and DETECTORS[n].found(text):
                    return n
            return None
        for n in self.names:
            if DETECTORS[n].found(text):
                return n
        return None


_SCANNERS: Dict[Tuple[str, ...], Scanner] = {}


def scanner(names: Iterable[str]) -> Scanner:
    """The (shared) :class:`Scanner` of ``names``."""
    key = tuple(names)
    s = _SCANNERS.get(key)
    if s is None:
        if len(_SCANNERS) > 256:  # names come from rules files: few distinct lists
            _SCANNERS.clear()
        s = _SCANNERS[key] = Scanner(key)
    return s


def scan(text: str, names: Iterable[str]) -> Optional[str]:
    """The name of the first detector (of ``names``) that finds something in ``text``, or None."""
    return scanner(names).scan(text)


__all__ = ["DETECTORS", "GROUPS", "DETECTOR_NAMES", "Cue", "Detector", "Scanner", "expand", "scan", "scanner",
           "visible", "luhn_ok",
           "iban_ok", "IBAN_LENGTHS"]
