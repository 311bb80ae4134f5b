"""Checks shared by entities for names, slugs and free text."""

import re
import unicodedata

from domain.errors import InvalidValue

SLUG_MAX = 64
_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def require_text(field: str, value: str, *, max_length: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidValue(f"{field} must be a string")
    if not allow_empty and not value.strip():
        raise InvalidValue(f"{field} must not be empty")
    if len(value) > max_length:
        raise InvalidValue(f"{field} must be at most {max_length} characters")
    if "\x00" in value:
        raise InvalidValue(f"{field} must not contain NUL characters")
    return value


# Characters that are invisible or reorder what is shown: names holding them can pass for other names.
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ZERO_WIDTH = frozenset("\u200b\u2060\ufeff")
_JOINERS = frozenset("\u200c\u200d")
"""Zero-width (non-)joiners are part of how some scripts and emoji are written: they are kept."""


def _hidden(char: str) -> bool:
    if char in _JOINERS:
        return False
    category = unicodedata.category(char)
    # Cc controls, Cf format characters (bidi overrides, zero-width space, soft hyphen...), Zl/Zp separators,
    # Cs lone surrogates.
    return category in ("Cc", "Cf", "Zl", "Zp", "Cs") or char in _BIDI_CONTROLS or char in _ZERO_WIDTH


def hidden_character(value: str) -> str | None:
    """The first control, bidi-override or zero-width character of a value, if it has one."""
    return next((c for c in value if _hidden(c)), None)


def require_name(field: str, value: str, *, max_length: int) -> str:
    """A display name: text without control, bidi-override or zero-width characters. Checked where a name
    is given (names stored before the rule existed are still read)."""
    require_text(field, value, max_length=max_length)
    hidden = hidden_character(value)
    if hidden is not None:
        raise InvalidValue(
            f"{field} must not contain control, bidi-override or zero-width characters (found U+{ord(hidden):04X})"
        )
    return value


def require_slug(field: str, value: str, *, max_length: int = SLUG_MAX) -> str:
    if not isinstance(value, str) or not _SLUG.match(value) or len(value) > max_length:
        raise InvalidValue(
            f"{field} must be 1-{max_length} lowercase letters, digits and single hyphens "
            f"(not at the start or end), got {value!r}"
        )
    return value


def _table(letters: str, latin: str) -> dict[str, str]:
    return dict(zip(letters, latin.split(" "), strict=True))


_CYRILLIC = _table(
    "абвгдежзийклмнопрстуфхцчшщъыьэюяёіїєґўђјљњћџѓќѕ",
    "a b v g d e zh z i y k l m n o p r s t u f kh ts ch sh shch _ y _ e yu ya e i yi ye g u dj j lj nj c dz gj kj dz",
)
_GREEK = _table("αβγδεζηθικλμνξοπρσςτυφχψω", "a v g d e z i th i k l m n x o p r s s t y f ch ps o")
_LATIN = _table("ßæœøłđðþ\u0131ħ", "ss ae oe o l d d th i h")
_LETTERS = {**_CYRILLIC, **_GREEK, **_LATIN}
_SYLLABLE = re.compile(r"^(?:HIRAGANA|KATAKANA|HANGUL)(?: LETTER| SYLLABLE)(?: SMALL)? ([A-Z]+)$")


def _latin(char: str) -> str:
    """How a character is written in a slug: Latin letters and digits as they are (accents dropped), Cyrillic
    and Greek transliterated, kana and Hangul by their syllable, other letters (ideographs, abjads...) by their
    code point, anything else as a separator."""
    if char.isascii():
        return char if char.isalnum() else " "
    if char in _LETTERS:
        return _LETTERS[char].strip("_")
    category = unicodedata.category(char)
    if category.startswith("M") or category == "Lm":
        return ""  # a combining mark or a length mark: part of the letter before it
    decomposed = unicodedata.normalize("NFKD", char)
    if decomposed != char and (decomposed[0].isascii() or decomposed[0] in _LETTERS):
        return "".join(_latin(c) for c in decomposed)  # accents dropped, compatibility forms unfolded
    if not char.isalnum():
        return " "
    syllable = _SYLLABLE.match(unicodedata.name(char, ""))
    return syllable.group(1).lower() if syllable else f" {ord(char):x} "


def slugify(name: str, *, max_length: int = SLUG_MAX) -> str:
    """A slug derived from a display name: 'Support Bot #2' -> 'support-bot-2', 'Поддержка' -> 'podderzhka'.
    A name without a letter or digit gives 'item'."""
    composed = unicodedata.normalize("NFC", name).lower()
    written = "".join(_latin(c) for c in composed)
    slug = re.sub(r"[^a-z0-9]+", "-", written).strip("-")
    slug = slug[:max_length].rstrip("-")
    return slug or "item"


def numbered_slug(slug: str, n: int, *, max_length: int = SLUG_MAX) -> str:
    """The n-th alternative of a derived slug that is taken: 'support-bot' -> 'support-bot-2'."""
    suffix = f"-{n}"
    return slug[: max_length - len(suffix)].rstrip("-") + suffix
