"""Safe writes: a program write never loses a person's save. A file is read once it has
settled, edited under its lock, swapped in with the replaced version in hand and journaled,
and a late editor save is merged back line by line."""
