"""The GPU cost model: how a node is priced, and how a device's table is fitted.

Pricing: a *query* (:mod:`.queries`) is a node (its signature, :mod:`.signatures`, made from a
torch.fx node by :mod:`.fx`, the one module here that imports torch) in a pair of
representations, or a transition. A device's table (:mod:`.table`) prices it as measured, else
by its :class:`.model.CostModel` (:mod:`.per_operator`, :mod:`.gradient_boosted` over
:mod:`.features`, :mod:`.transferred`); :mod:`.prediction` sums a program's prices;
:mod:`.pricing` is what an optimiser needs of whatever prices; :mod:`.device_limits`, what
makes a layout illegal on the device.

Fitting: :mod:`.measurements` (a device's runs, their file, models left out in turn),
:mod:`.fit` (the table of them, or one transferred from another device's, with its expected
error on unseen models) and :mod:`.program_choice` (which programs a new device runs first).

Of ours it imports only :mod:`layoutkit`, with no cycle among its modules.
"""
