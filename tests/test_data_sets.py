"""Every test set a job can score (chapter 13): Multi30k's four test sets and the out-of-domain Tatoeba set.

- With the data root (CI sets $ANNOTATED_TRANSFORMER_DATA to it; `find_multi30k()` finds it): each test split loads in
  both directions with its documented number of sentences. Without it these tests skip, saying why, except under
  CI=true, where a missing data root is a failure (tests/conftest.py refuses to run; the library does not look at CI).
- Always: which splits `available_test_splits` lists in a fake data root; a Tatoeba download from a file:// mirror
  that serves the wrong bytes is refused, naming the file; a data root without tatoeba/ gives an error that names the
  missing files and where to get them."""
import gzip
from pathlib import Path
import pytest
from annotated_transformer.data import (DATA_ENV, LANGS, SPLITS, TEST_SPLITS, TATOEBA, TATOEBA_EVERY, TATOEBA_FILES,
    TATOEBA_LINES, TATOEBA_PAIRS, TATOEBA_UPSTREAM, TATOEBA_URL, TATOEBA_URL_ENV, available_test_splits, ensure_splits,
    find_multi30k, load_split, read_parallel, split_files)

SIZES = {"test_2016_flickr": 1000, "test_2017_flickr": 1000, "test_2017_mscoco": 461, "test_2018_flickr": 1071,
         TATOEBA: 2196}


@pytest.fixture
def m30k() -> Path:
    "The Multi30k folder of the configured data root; skip without one (under CI=true, tests/conftest.py refuses to run)."
    folder = find_multi30k(quiet=True)
    if folder is None: pytest.skip(f"no Multi30k on this machine (set ${DATA_ENV} to a data root holding multi30k/ "
                                   f"and tatoeba/)")
    return folder


@pytest.fixture
def no_data_root(tmp_path, monkeypatch):
    "A machine with no data root: an empty user cache, nothing configured."
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.delenv(TATOEBA_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "annotated_transformer"


def test_sizes_are_the_documented_ones():
    assert {s: SPLITS[s] for s in TEST_SPLITS} == {s: SIZES[s] for s in TEST_SPLITS}
    assert (TATOEBA_LINES, TATOEBA_EVERY, TATOEBA_PAIRS) == (17565, 8, SIZES[TATOEBA])


@pytest.mark.parametrize("split", [*TEST_SPLITS, TATOEBA])
def test_every_test_split_loads_in_both_directions(m30k, split):
    folder = m30k
    assert split in available_test_splits(folder)
    de_en = load_split(split, folder, src="de", tgt="en")
    en_de = load_split(split, folder, src="en", tgt="de")
    assert len(de_en) == SIZES[split]
    assert en_de == [(e, d) for d, e in de_en]
    assert all(isinstance(d, str) and isinstance(e, str) and d.strip() and e.strip() for d, e in de_en)
    if split == TATOEBA:                                     # the subset rule: lines 0, 8, 16, ... of the full set
        full = read_parallel(*split_files(TATOEBA, folder))
        assert len(full) == TATOEBA_LINES
        assert de_en == full[::TATOEBA_EVERY]


def test_available_test_splits_in_a_fake_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    m = root / "multi30k"; m.mkdir(parents=True)
    for s in ("train", "val", "test_2017_flickr", "test_2018_flickr"):
        for lang in LANGS: (m / f"{s}.{lang}.gz").write_bytes(gzip.compress(b"x\n"))
    (m / "test_2016_flickr.de.gz").write_bytes(gzip.compress(b"x\n"))   # one side only: not available
    assert available_test_splits(root) == ["test_2017_flickr", "test_2018_flickr"]
    t = root / "tatoeba"; t.mkdir()
    assert available_test_splits(root) == ["test_2017_flickr", "test_2018_flickr"]   # an empty tatoeba/: not listed
    for lang in LANGS: (t / TATOEBA_FILES[lang]).write_text("x\n", encoding="utf-8")  # plain text works too
    assert available_test_splits(root) == ["test_2017_flickr", "test_2018_flickr", TATOEBA]
    monkeypatch.setenv(DATA_ENV, str(m))                    # the env var naming the files' folder: ../tatoeba/
    assert available_test_splits() == ["test_2017_flickr", "test_2018_flickr", TATOEBA]


def test_available_test_splits_in_the_cache_lists_all(no_data_root):
    assert available_test_splits() == [*TEST_SPLITS, TATOEBA]
    assert not no_data_root.exists()                        # listing downloads nothing


def test_tatoeba_download_with_a_wrong_checksum_is_refused(tmp_path, no_data_root, monkeypatch):
    mirror = tmp_path / "mirror"; mirror.mkdir()
    for lang in LANGS: (mirror / TATOEBA_UPSTREAM[lang]).write_text("Nicht die Datei.\n", encoding="utf-8")
    monkeypatch.setenv(TATOEBA_URL_ENV, mirror.as_uri())
    with pytest.raises(OSError, match=r"tatoeba-test-v2021-08-07\.deu: sha256 [0-9a-f]{64} does not match"):
        load_split(TATOEBA)
    tat = no_data_root / "tatoeba"
    assert not tat.exists() or not any(tat.iterdir())      # nothing half-written


def test_tatoeba_downloads_from_a_mirror(m30k, tmp_path, no_data_root, monkeypatch):  # m30k first: before the env is cleared
    "The official text served by a file:// mirror: checked, stored gzipped in the cache, and the same split."
    folder = m30k
    files = split_files(TATOEBA, folder)
    if files is None: pytest.fail(f"the data root {folder.parent} has no tatoeba/ folder")
    mirror = tmp_path / "mirror"; mirror.mkdir()
    for lang, p in zip(LANGS, files):
        (mirror / TATOEBA_UPSTREAM[lang]).write_bytes(gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes())
    monkeypatch.setenv(TATOEBA_URL_ENV, mirror.as_uri())
    expected = load_split(TATOEBA, folder)
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert load_split(TATOEBA, src="en", tgt="de") == [(e, d) for d, e in expected]
    assert sorted(p.name for p in (no_data_root / "tatoeba").iterdir()) == sorted(f"{n}.gz" for n in TATOEBA_FILES.values())


def test_a_configured_root_without_tatoeba_says_what_is_missing(tmp_path, monkeypatch):
    root = tmp_path / "root"; m = root / "multi30k"; m.mkdir(parents=True)
    for s in ("train", "val"):
        for lang in LANGS: (m / f"{s}.{lang}").write_text("x\n", encoding="utf-8")
    monkeypatch.setenv(DATA_ENV, str(root))
    with pytest.raises(FileNotFoundError) as e: ensure_splits(["val", TATOEBA])
    msg = str(e.value)
    for part in (str(root / "tatoeba"), "tatoeba-test-v2021-08-07.de.gz", "tatoeba-test-v2021-08-07.en.gz", TATOEBA_URL):
        assert part in msg, part
    assert not (root / "tatoeba").exists()                 # a folder the user named is never written to
    with pytest.raises(FileNotFoundError, match="tatoeba-test-v2021-08-07.de.gz"): load_split(TATOEBA, root)


def test_a_data_dir_without_multi30k_says_how_to_get_it(tmp_path):
    "--data-dir naming a folder with neither multi30k/ nor its files: the error names the mirror variable and where the files go."
    from annotated_transformer.data import DATA_URL_ENV, resolve_data_dir
    with pytest.raises(FileNotFoundError) as e: resolve_data_dir(tmp_path)
    msg = str(e.value)
    for part in ("holds neither a multi30k/ folder nor Multi30k files", DATA_URL_ENV, str(tmp_path / "multi30k"), DATA_ENV):
        assert part in msg, (part, msg)


@pytest.mark.parametrize("bpe", [False, True], ids=["word", "bpe"])
def test_nfc_and_nfd_encode_to_the_same_ids(bpe):
    "ü as one code point (NFC) or as u + combining diaeresis (NFD): the same word, the same ids, in both vocabulary kinds."
    import unicodedata
    from annotated_transformer.data import build_codec
    nfc = [("Ein Mädchen läuft über die Brücke.", "A girl walks over the bridge."),
           ("Zwei Mädchen grüßen die Jungen.", "Two girls greet the boys."),
           ("Über der Brücke fliegt ein Vogel.", "A bird flies over the bridge.")]
    nfd = [tuple(unicodedata.normalize("NFD", x) for x in p) for p in nfc]
    assert nfd != nfc
    codec = build_codec((nfc + nfd) * 2, bpe=bpe, bpe_vocab_size=200, min_freq=2)   # a corpus holding both forms
    for s, _ in nfc:
        ids = codec.encode_src([s])[0]
        assert codec.encode_src([unicodedata.normalize("NFD", s)])[0] == ids
        assert 3 not in ids                                                      # UNK_IDX: the words are known
    if not bpe:
        for v in (codec.src_vocab, codec.tgt_vocab):
            assert all(unicodedata.is_normalized("NFC", t) for t in v.itos)      # no NFD token in the vocabulary
