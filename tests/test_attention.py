"""headlab.core.attention: the roles of a pair's tokens, whatever the model's way of joining the two texts."""
from headlab.core.attention import token_roles
from headlab.core.evaluate import encode
from headlab.models.loading import load_tokenizer


def test_roles_of_a_pair_with_two_separators_in_the_middle(mpnet_folder, mpnet_pairs):
    """MPNet joins a pair as `<s> a </s></s> b </s>`."""
    tokenizer = load_tokenizer(str(mpnet_folder))
    roles = token_roles(tokenizer, encode(tokenizer, mpnet_pairs).input_ids[0])
    assert roles.tokens == ["<s>", "a", "cat", "sat", "on", "the", "mat", "</s>", "</s>", "the", "dog", "ran", "</s>"]
    assert (roles.cls, roles.seps) == (0, [7, 8, 12])
    assert [roles.tokens[i] for i in roles.query] == ["a", "cat", "sat", "on", "the", "mat"]
    assert [roles.tokens[i] for i in roles.title] == ["the", "dog", "ran"]
