"""Your sentence follows you (ui/kit/yours.py), in AppTest on the whole app: typed on one page, the next opens on it;
a link's sentence is kept; a pair page keeps its pair for a single sentence; stale choices never raise. And the
Attention page's query picker after a new sentence: the same token at the same position, or the default."""


from streamlit.testing.v1 import AppTest

from bertviz_lab.ui.shell.models import DEFAULT_CHECKPOINT, cached_checkpoint
from bertviz_lab.ui.shell.state import Attention, Losses, Predict
from bertviz_lab.views import inputs
from tests.helpers.lab import app_test
from tests.helpers.paths import ROOT

APP = str(ROOT / "app.py")
PREDICT, ATTENTION, LOSSES = "pages/predict.py", "pages/attention.py", "pages/losses.py"
TYPED = "the dog sat on the [MASK] ."
AGAIN = "a bird sang in the [MASK] ."


def app() -> AppTest:
    at = app_test(APP, 90).run()
    assert not at.exception, at.exception
    return at


def go(at: AppTest, page: str) -> AppTest:
    """Open `page` from the menu. AppTest keeps the last page's address (the app writes its view into it), which
    the next page would read as a link: a click in the menu carries none, so it is cleared here."""
    at.query_params.clear()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def tokens(text: str) -> list[str]:
    ckpt = cached_checkpoint(str(DEFAULT_CHECKPOINT), "cpu")
    return inputs.encode(ckpt.tokenizer, ckpt.model, text).tokens


def query_label(at: AppTest) -> str:
    box = at.selectbox(key=Attention.QUERY.name)
    return box.format_func(box.value)


def test_typed_on_predict_opens_attention_on_it_and_back():
    at = go(app(), PREDICT)
    at.text_area(key=Predict.SENTENCES.text_a.name).input(TYPED).run()
    go(at, ATTENTION)
    assert at.text_area(key=Attention.SENTENCES.text_a.name).value == TYPED
    drawn = at.get("plotly_chart")[0].proto.spec
    assert all(f'"{i} {t}"' in drawn for i, t in enumerate(tokens(TYPED)))  # the heatmap reads the typed sentence
    at.text_area(key=Attention.SENTENCES.text_a.name).input(AGAIN).run()
    go(at, PREDICT)
    assert at.text_area(key=Predict.SENTENCES.text_a.name).value == AGAIN
    assert any(m.value.startswith("Guesses: #1 → **") for m in at.markdown)  # the answer under the box


def test_a_links_sentence_is_kept_and_becomes_yours():
    at = app_test(APP, 90)
    at.query_params.update({"a": TYPED})
    at.run()
    at.switch_page(ATTENTION)
    at.query_params.clear()
    at.query_params.update({"a": TYPED})
    at.run()
    assert at.text_area(key=Attention.SENTENCES.text_a.name).value == TYPED
    go(at, PREDICT)
    assert at.text_area(key=Predict.SENTENCES.text_a.name).value == TYPED


def test_losses_keeps_its_pair_when_the_typed_sentence_is_single():
    at = go(app(), PREDICT)
    at.text_area(key=Predict.SENTENCES.text_a.name).input("the cat ran home .").run()
    go(at, LOSSES)
    assert at.text_area(key=Losses.SENTENCES.text_a.name).value == "the cat ran home ."
    assert at.toggle(key=Losses.SENTENCES.pair.name).value is True
    assert at.text_area(key=Losses.SENTENCES.text_b.name).value == Losses.SENTENCES.text_b.default


def test_a_sentence_typed_on_losses_leaves_its_default_pair_there_but_a_pair_of_yours_travels():
    at = go(app(), LOSSES)
    at.text_area(key=Losses.SENTENCES.text_a.name).input("the cat ran home .").run()
    go(at, ATTENTION)
    assert at.text_area(key=Attention.SENTENCES.text_a.name).value == "the cat ran home ."
    assert at.toggle(key=Attention.SENTENCES.pair.name).value is False  # Losses' own B stayed on Losses
    go(at, LOSSES)
    at.text_area(key=Losses.SENTENCES.text_b.name).input("it rained all day .").run()
    go(at, ATTENTION)
    assert at.toggle(key=Attention.SENTENCES.pair.name).value is True
    assert at.text_area(key=Attention.SENTENCES.text_b.name).value == "it rained all day ."


def test_clicked_words_the_new_sentence_lacks_never_raise():
    at = go(app(), PREDICT)
    at.text_area(key=Predict.SENTENCES.text_a.name).input("the cat sat on the mat .").run()
    at.pills(key=Predict.WORDS.name).set_value(["cat", "mat"]).run()
    assert not at.exception
    go(at, ATTENTION)
    at.text_area(key=Attention.SENTENCES.text_a.name).input("a bird sang in the tree .").run()
    go(at, PREDICT)
    assert not at.exception
    assert at.text_area(key=Predict.SENTENCES.text_a.name).value == "a bird sang in the tree ."
    assert set(at.pills(key=Predict.WORDS.name).value or []) <= set(at.pills(key=Predict.WORDS.name).options)


def test_a_new_sentence_resets_a_query_whose_token_moved():
    at = go(app(), ATTENTION)
    default = tokens(Attention.SENTENCES.text_a.default)
    assert query_label(at) == f"{default.index('it')} it"  # the pronoun: the page's default query
    new = "the dog sat on the mat because it was very tired ."  # "it" moves; the old position holds another token
    moved = tokens(new)
    assert moved[default.index("it")] != "it"
    at.text_area(key=Attention.SENTENCES.text_a.name).input(new).run()
    assert query_label(at) == f"{moved.index('it')} it"
    bars = [c.proto.spec for c in at.get("plotly_chart") if "query" in c.proto.spec]
    assert any(f"query {moved.index('it')} it" in spec for spec in bars)  # the steps use the query the box shows


def test_a_new_sentence_keeps_a_query_with_the_same_token_at_the_same_position():
    at = go(app(), ATTENTION)
    at.selectbox(key=Attention.QUERY.name).set_value(2).run()  # "2 animal"
    at.text_area(key=Attention.SENTENCES.text_a.name).input("the animal was tired .").run()
    assert query_label(at) == "2 animal"
    at.text_area(key=Attention.SENTENCES.text_a.name).input("a cat was tired .").run()  # 2 is now "cat"
    assert query_label(at) == "1 a"  # no pronoun: token 1, the page's default
