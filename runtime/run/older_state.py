"""A checkpoint written by an earlier version, read into today's train state.

The train state grows: a part added since (the ring of lagged params, an env's completed
``info``) is missing from an older checkpoint, and a part that was an empty placeholder then
(``None``) may be gone now. The rule (docs/design.md, "Runs outlive upgrades"): what the
checkpoint holds is restored; a part it lacks takes its value from the fresh state (its
initial value: at lag 0 the ring is ``None``); an empty part it holds and today's state
lacks is dropped. A checkpoint holding an array that today's state has no place for cannot
be continued (``StateMismatch``; the checkpointer says so in one line and moves nothing
aside).

Parts are named by their key paths, as orbax names them on disk (``('learner', 'params',
...)``; a tuple's items by index, a dataclass's or named tuple's fields by name).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import orbax.checkpoint as ocp
from etils import epath

Path = tuple[str, ...]
ITEM = "default"  # the item a single-item orbax save writes


class StateMismatch(RuntimeError):
    """A readable checkpoint whose train state this version cannot continue."""


@dataclasses.dataclass(frozen=True)
class Difference:
    """How a checkpoint's parts differ from today's train state.

    Attributes:
      added: parts today's state has and the checkpoint lacks (taken from the fresh state).
      dropped: parts the checkpoint holds and today's state lacks.
    """

    added: tuple[Path, ...]
    dropped: tuple[Path, ...]


def named_leaves(tree) -> dict[Path, Any]:
    """``{key path: leaf}`` of ``tree``, ``None`` placeholders kept as leaves."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: x is None)
    return {tuple(_key_name(k) for k in path): leaf for path, leaf in flat}


def saved_structure(step_dir: str):
    """Checkpoint ``step_dir``'s tree as written: nested dicts and lists whose leaves are
    orbax's array metadata (``shape``, ``dtype``) or ``None``."""
    metadata = ocp.StandardCheckpointHandler().metadata(epath.Path(step_dir) / ITEM)
    return getattr(metadata, "tree", metadata)


def difference(like, saved) -> Difference:
    """How ``saved`` (``saved_structure``) differs from ``like`` (today's train state).

    Raises:
      StateMismatch: ``saved`` holds an array that ``like`` lacks, or one of another
        shape: the line names the first such part.
    """
    now, then = named_leaves(like), named_leaves(saved)
    for path, leaf in then.items():
        if leaf is None:
            continue
        if now.get(path) is None:
            raise StateMismatch(f"it holds {_dotted(path)}, which this run's "
                                         "train state has no place for")
        if tuple(leaf.shape) != stored_shape(now[path]):
            raise StateMismatch(
                f"its {_dotted(path)} is {list(leaf.shape)}, this run's "
                f"{list(stored_shape(now[path]))}")
    return Difference(added=tuple(p for p in now if p not in then),
                      dropped=tuple(p for p in then if p not in now))


def subtree(tree, at: Path):
    """The part of ``tree`` (nested mappings, as orbax reads and writes them) at key path
    ``at``; None where it has none."""
    for name in at:
        if not isinstance(tree, dict) or name not in tree:
            return None
        tree = tree[name]
    return tree


def check_part(like, saved, at: Path) -> None:
    """Raises ``StateMismatch`` unless ``saved`` (a part of a checkpoint's
    ``saved_structure``, at key path ``at``; None where it lacks it) holds exactly the
    arrays of ``like``, with their shapes."""
    if saved is None:
        raise StateMismatch(f"it holds no {_dotted(at)}")
    changed = difference(like, saved)  # an array of another shape or without a place
    missing = [p for p in changed.added if named_leaves(like)[p] is not None]
    if missing:
        raise StateMismatch(f"its {_dotted(at)} lacks {_dotted(missing[0])}")


def stored_shape(leaf) -> tuple[int, ...]:
    """The shape ``leaf`` has on disk: a typed PRNG key array's key data (``[..., 2]`` for
    threefry), any other array's own."""
    if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
        return tuple(jax.eval_shape(jax.random.key_data, leaf).shape)
    return tuple(leaf.shape)


def restore_older(restore: Callable[[Any], Any], like, saved):
    """``like``'s structure filled from a checkpoint of another structure, ``saved``:
    ``restore(item)`` reads the checkpoint into the shapes, dtypes and shardings of
    ``item`` (``saved``'s structure, ``like``'s leaves, ``None`` where ``saved`` holds
    ``None``); the parts
    ``saved`` lacks keep ``like``'s values."""
    now = named_leaves(like)
    item = jax.tree_util.tree_map_with_path(
        lambda path, leaf: None if leaf is None else now[tuple(_key_name(k) for k in path)],
        saved, is_leaf=lambda x: x is None)
    restored = named_leaves(restore(item))  # ``restore`` makes the leaves abstract
    leaves, treedef = jax.tree_util.tree_flatten(like, is_leaf=lambda x: x is None)
    paths = list(now)
    return jax.tree_util.tree_unflatten(
        treedef, [restored[p] if p in restored else leaf for p, leaf in zip(paths, leaves)])


def _key_name(key) -> str:
    """One key of a key path as orbax writes it: a name, or an index as a string."""
    for attribute in ("name", "key", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def _dotted(path: Path) -> str:
    return ".".join(path)
