"""Chapter 5. What makes an argument of a family's model (nn/llama.py ... nn/deepseek_v3.py) bad."""
from tinyattn.nn.open_decoder_checks import (family_differences, ids_and_cache_fit,  # noqa: F401
                                             settings_fit)              # (Llama.forward's)
from tinyattn.nn.open_layers_checks import attention_fits, input_and_cache_fit  # noqa: F401


def family_fits(self, settings, dtype=None):
    """A family's model: settings a DecoderSettings of sizes that fit (settings_fit), of the
    model's family (model_type), every switch the family's code fixes at its value there
    (nn/families.py's FIXED). (What the family's files cannot hold besides is refused by
    save_pretrained.)"""
    settings_fit(self, settings)
    if settings.model_type != self.model_type:
        raise ValueError(f"settings.model_type must be {self.model_type!r} for a "
                         f"{type(self).__name__}, got {settings.model_type!r}")
    differences = family_differences(settings)
    if differences:
        raise ValueError(f"a {self.model_type} model cannot have {'; '.join(differences)}")
