"""Calendar helpers."""


def is_leap_year(year: int) -> bool:
    """Every fourth year, except centuries that 400 does not divide."""
    return year % 4 == 0 and year % 100 != 0 and year % 400 == 0


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if is_leap_year(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31
