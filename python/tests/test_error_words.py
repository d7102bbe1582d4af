"""qgemm.error_string (the meaning of qgemm.torch's device error word) and
qgemm.recipes.Recipe, without a GPU or torch."""
import unittest

import qgemm
from qgemm.recipes import Recipe


class ErrorStringTest(unittest.TestCase):
    def test_each_bit_has_its_own_text(self):
        texts = {
            qgemm.GROUP_ERROR_ORDER: "negative or decreasing",
            qgemm.GROUP_ERROR_RANGE: "an offset past rows",
            qgemm.GROUP_ERROR_ALIGNMENT: "not a multiple of",
            qgemm.GROUP_ERROR_LAYOUT: "row_group not sorted",
            qgemm.ROUTING_ERROR_DUPLICATE: "one expert twice",
            qgemm.ROUTING_ERROR_RANGE: "outside [-1, num_experts)",
        }
        for bit, words in texts.items():
            self.assertIn(words, qgemm.error_string(bit), bit)
            others = [w for b, w in texts.items() if b != bit]
            for w in others:
                self.assertNotIn(w, qgemm.error_string(bit), (bit, w))

    def test_combined_and_unknown_bits(self):
        word = qgemm.GROUP_ERROR_ALIGNMENT | qgemm.ROUTING_ERROR_RANGE
        text = qgemm.error_string(word)
        self.assertIn("not a multiple of", text)
        self.assertIn("outside [-1", text)
        self.assertEqual(qgemm.error_string(0), "")
        self.assertIn("unknown bits 0x10000", qgemm.error_string(1 << 16))
        # An int32 read with bit 31 set is negative.
        self.assertIn("unknown bits 0x80000000", qgemm.error_string(-2**31))

    def test_routing_bits_do_not_overlap_group_bits(self):
        group = (qgemm.GROUP_ERROR_ORDER | qgemm.GROUP_ERROR_RANGE |
                 qgemm.GROUP_ERROR_ALIGNMENT | qgemm.GROUP_ERROR_LAYOUT)
        routing = qgemm.ROUTING_ERROR_DUPLICATE | qgemm.ROUTING_ERROR_RANGE
        self.assertEqual(group & routing, 0)


class RecipeTest(unittest.TestCase):
    def test_deepseek(self):
        r = Recipe.DEEPSEEK
        self.assertEqual((r.name, r.activation_block, r.weight_block,
                          r.wgrad_block, r.scale_dtype, r.element),
                         ("deepseek", (1, 128), (128, 128), (128, 1), "f32",
                          "e4m3"))
        self.assertEqual(r.block_text("weight_block"), "128x128")
        self.assertIs(Recipe.of("deepseek"), r)
        self.assertIs(Recipe.of(r), r)

    def test_unknown_recipe_names_the_choices(self):
        for bad in ("mxfp9", None, 3):
            with self.assertRaisesRegex(qgemm.ArgumentError,
                                        "recipe = .*deepseek"):
                Recipe.of(bad)

    def test_frozen(self):
        with self.assertRaises(Exception):
            Recipe.DEEPSEEK.name = "other"


if __name__ == "__main__":
    unittest.main()
