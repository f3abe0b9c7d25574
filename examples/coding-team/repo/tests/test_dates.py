import unittest

from kit.dates import days_in_month, is_leap_year


class LeapYearTest(unittest.TestCase):
    def test_plain_years(self) -> None:
        self.assertTrue(is_leap_year(2024))
        self.assertFalse(is_leap_year(2023))

    def test_centuries(self) -> None:
        self.assertFalse(is_leap_year(1900))
        self.assertTrue(is_leap_year(2000))

    def test_february(self) -> None:
        self.assertEqual(days_in_month(2024, 2), 29)
        self.assertEqual(days_in_month(2023, 2), 28)
