"""A str enum whose members each carry a sentence: `Member.__doc__` says what it means.

Declarations that meta.json keeps as plain strings (capabilities, the post's roles) are members of such an
enum, so a run recorded before a member existed still reads, and the meaning sits beside the value."""

from __future__ import annotations

from enum import StrEnum
from typing import Self


class DescribedStrEnum(StrEnum):
    """Members are declared as (value, sentence)."""

    def __new__(cls, value: str, sentence: str) -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.__doc__ = sentence
        return member
