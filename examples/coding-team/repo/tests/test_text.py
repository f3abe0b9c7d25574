import unittest

from kit.text import slug, truncate


class TruncateTest(unittest.TestCase):
    def test_long_text_is_cut(self) -> None:
        self.assertEqual(truncate("hello world", 8), "hello...")

    def test_text_of_exactly_the_width_is_kept(self) -> None:
        self.assertEqual(truncate("hello", 5), "hello")


class SlugTest(unittest.TestCase):
    def test_slug(self) -> None:
        self.assertEqual(slug("Hello, World!"), "hello-world")
