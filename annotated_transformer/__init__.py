__version__ = "0.1.0"
__all__ = []

# %% ../nbs/06_model.ipynb #3fa49156
from .model import create_transformer, count_parameters, greedy_decode, get_config, TransformerConfig, PRESETS
from .attention import scaled_dot_product_attention, padding_mask, causal_mask, target_mask
from .embeddings import PAD_IDX, BOS_IDX, EOS_IDX, UNK_IDX

# %% ../nbs/06_model.ipynb #8e55b40d
from .model import create_transformer, count_parameters, greedy_decode, get_config, TransformerConfig, PRESETS
from .attention import scaled_dot_product_attention, padding_mask, causal_mask, target_mask
from .embeddings import PAD_IDX, BOS_IDX, EOS_IDX, UNK_IDX

# %% ../nbs/06_model.ipynb #8e55b40d
from .model import create_transformer, count_parameters, greedy_decode, get_config, TransformerConfig, PRESETS
from .attention import scaled_dot_product_attention, padding_mask, causal_mask, target_mask
from .embeddings import PAD_IDX, BOS_IDX, EOS_IDX, UNK_IDX